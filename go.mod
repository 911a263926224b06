module github.com/flockml/flock

go 1.26
