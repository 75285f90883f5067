module kubewasm.dev/examples/mongodb-monitor

go 1.27
