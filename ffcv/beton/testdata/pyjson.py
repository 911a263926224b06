#!/usr/bin/python3
"""Writes pyjson.json: values and what Python's json.dumps (FFCV's
JSONField encoder) makes of them, to check beton's Python-style JSON.
Dict keys are inserted in sorted order, the order Go's encoder uses.
Run with Debian's python3:
    /usr/bin/python3 pyjson.py > pyjson.json
"""
import json

CASES = [
    {"id": 0, "name": "sample-0"},
    {"id": 12345, "name": "sample-12345"},
    [1, 2, [3, [], {}], {"a": None, "b": True, "c": False}],
    {"text": "a, b: c", "quote": "say \"hi\"\\"},
    {"unicode": "caf\u00e9 \u20ac \U0001F600", "ctrl": "\x00\x01\x08\x0c\n\r\t\x1f\x7f"},
    {"sep": "\u2028\u2029", "slash": "a/b", "html": "<&>"},
    "plain string",
    -7,
    [],
    {},
]



def sorted_keys(v):
    if isinstance(v, dict):
        return {k: sorted_keys(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [sorted_keys(x) for x in v]
    return v


CASES = [sorted_keys(v) for v in CASES]
print(json.dumps([{"value": v, "dumps": json.dumps(v)} for v in CASES],
                 indent=1))
