module kubewasm.dev/examples/seldon-endpoint

go 1.27
