module iot-operator/cluster/pause

go 1.24.0
