#!/usr/bin/env bash
# Regenerate the Python modules of the apache.rocketmq.v2 contract (src/sievemq/proxy/v2/*_pb2*.py) from
# its .proto files, with grpcio-tools 1.85.1 (pip install grpcio-tools==1.85.1). The modules are committed; run this
# after changing a .proto (tests/interop/test_proto_contract.py checks the .proto files against the real client).
set -euo pipefail
cd "$(dirname "$0")/.."
out=src/sievemq/proxy/v2
.venv/bin/python -m grpc_tools.protoc -I "$out" --python_out="$out" "$out/definition.proto"
.venv/bin/python -m grpc_tools.protoc -I "$out" --python_out="$out" --grpc_python_out="$out" "$out/service.proto"
# protoc writes plain imports between the generated modules; make them package imports.
sed -i 's/^import definition_pb2 as definition__pb2$/from sievemq.proxy.v2 import definition_pb2 as definition__pb2/' \
  "$out/service_pb2.py" "$out/service_pb2_grpc.py"
sed -i 's/^import service_pb2 as service__pb2$/from sievemq.proxy.v2 import service_pb2 as service__pb2/' \
  "$out/service_pb2_grpc.py"
# Keep the stub, the servicer and add_MessagingServiceServicer_to_server; drop grpc's experimental static-method
# client class (unused here, and two thirds of the file).
sed -i '/# This class is part of an EXPERIMENTAL API\./,$d' "$out/service_pb2_grpc.py"
