module kubewasm.dev/kubewasm

go 1.27
