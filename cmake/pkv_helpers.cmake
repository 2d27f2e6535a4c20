# Small helpers in the spirit of abseil's absl_cc_library: one call declares a component's library,
# its alias pkv::NAME, include root and dependencies, so every folder reads the same way.
include(CMakeParseArguments)

set(PKV_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)

# pkv_cc_library(NAME kv_cache SRCS a.cc HDRS a.h DEPS pkv::common [CUDA_SRCS k.cu] [CUDA_DEPS ...])
# CUDA_SRCS/CUDA_DEPS are only compiled/linked when CUDA was found (PKV_HAVE_CUDA).
function(pkv_cc_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;HDRS;DEPS;CUDA_SRCS;CUDA_DEPS;DEFINES" ${ARGN})
  set(_srcs ${A_SRCS})
  if(PKV_HAVE_CUDA)
    list(APPEND _srcs ${A_CUDA_SRCS})
  endif()
  if(_srcs)
    add_library(pkv_${A_NAME} STATIC ${_srcs} ${A_HDRS})
    set(_vis PUBLIC)
  else()
    add_library(pkv_${A_NAME} INTERFACE)
    set(_vis INTERFACE)
  endif()
  add_library(pkv::${A_NAME} ALIAS pkv_${A_NAME})
  target_include_directories(pkv_${A_NAME} ${_vis} ${PROJECT_SOURCE_DIR})
  target_link_libraries(pkv_${A_NAME} ${_vis} ${A_DEPS})
  if(A_DEFINES)
    target_compile_definitions(pkv_${A_NAME} ${_vis} ${A_DEFINES})
  endif()
  if(_srcs)
    target_compile_options(pkv_${A_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PKV_WARNINGS}>)
    if(PKV_HAVE_CUDA AND A_CUDA_SRCS)
      pkv_cuda_target(pkv_${A_NAME})
      target_link_libraries(pkv_${A_NAME} PUBLIC ${A_CUDA_DEPS})
    endif()
  endif()
endfunction()

# Flags every CUDA-compiling target shares: explicit -gencode list (CMake 3.25 cannot spell sm_90a).
function(pkv_cuda_target target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:${PKV_CUDA_GENCODE} --expt-relaxed-constexpr -lineinfo -Xcompiler=-fno-strict-aliasing>)
  target_link_options(${target} PRIVATE $<$<LINK_LANGUAGE:CUDA>:${PKV_CUDA_GENCODE}>)
  target_compile_definitions(${target} PUBLIC PKV_HAVE_CUDA=1)
  if(PKV_FP8_SOFTWARE_CVT)
    target_compile_definitions(${target} PRIVATE PKV_FP8_SOFTWARE_CVT=1)
  endif()
  target_link_libraries(${target} PUBLIC CUDA::cudart)
endfunction()

# pkv_cc_binary(NAME pkv-worker SRCS main.cc DEPS pkv::worker)
function(pkv_cc_binary)
  cmake_parse_arguments(A "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  target_compile_options(${A_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PKV_WARNINGS}>)
endfunction()

# pkv_cc_test(NAME page_pool_test SRCS page_pool_test.cc DEPS pkv::kv_cache LABELS unit)
# LABELS: unit (host only), integration (real processes on loopback), device (needs a GPU).
function(pkv_cc_test)
  cmake_parse_arguments(A "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;ENV" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  target_compile_options(${A_NAME} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PKV_WARNINGS}>)
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  include(GoogleTest)
  gtest_discover_tests(${A_NAME}
    PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT}
               ENVIRONMENT "PKV_BIN_DIR=${PROJECT_BINARY_DIR}/bin;PKV_SOURCE_DIR=${PROJECT_SOURCE_DIR};${A_ENV}"
    DISCOVERY_TIMEOUT 60)
endfunction()
