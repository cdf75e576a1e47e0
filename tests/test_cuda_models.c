// test_cuda's whole-model tests as a program of their own (see tests/test_cuda.c).
#define TEST_CUDA_MODELS 1
#include "test_cuda.c"
