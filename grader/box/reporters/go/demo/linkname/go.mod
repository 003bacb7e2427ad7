module example.com/linkname

go 1.24
