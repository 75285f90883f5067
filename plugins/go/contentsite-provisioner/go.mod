module kubewasm.dev/examples/contentsite-provisioner

go 1.27
