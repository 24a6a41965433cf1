# Runs CudaBackend.cmake's check on one delegate file and prints what would be staged:
#   cmake -DMODULE_DIR=native/cmake -DDELEGATE=file -DRUNTIME_SONAME=libexecutorch.so
#         -DCALLER_STREAM_SONAME=name -P cuda_backend_case.cmake
cmake_minimum_required(VERSION 3.28)
include("${MODULE_DIR}/CudaBackend.cmake")
etserve_cuda_backend_files(files "${DELEGATE}" "${RUNTIME_SONAME}" "${CALLER_STREAM_SONAME}")
list(TRANSFORM files REPLACE ".*/" "")
message("staged in load order: ${files}")
