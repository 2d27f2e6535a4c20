# Included by the top-level CMakeLists: registers the libFuzzer smoke run (scripts/fuzz.sh: build
# fuzz/ with clang in <build>/fuzz, 15 s per target) as the ctest `fuzz_smoke` (label unit) when
# PKV_FUZZ is on and clang++ with its libFuzzer runtime is installed; otherwise says why not.
if(NOT PKV_FUZZ)
  return()
endif()
find_program(PKV_CLANGXX clang++)
find_program(PKV_BASH bash)
if(NOT PKV_CLANGXX OR NOT PKV_BASH)
  message(STATUS "fuzz_smoke test skipped: no clang++ (apt-get install clang libclang-rt-14-dev)")
  return()
endif()
execute_process(COMMAND ${PKV_CLANGXX} --print-runtime-dir OUTPUT_VARIABLE _pkv_rt_dir
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT EXISTS "${_pkv_rt_dir}/libclang_rt.fuzzer-x86_64.a" AND
   NOT EXISTS "${_pkv_rt_dir}/libclang_rt.fuzzer.a")
  message(STATUS "fuzz_smoke test skipped: clang's libFuzzer runtime is missing "
                 "(apt-get install libclang-rt-14-dev)")
  return()
endif()
add_test(NAME fuzz_smoke COMMAND ${PKV_BASH} ${PROJECT_SOURCE_DIR}/scripts/fuzz.sh)
set_tests_properties(fuzz_smoke PROPERTIES LABELS unit TIMEOUT 600
                     ENVIRONMENT "FUZZ_BUILD=${PROJECT_BINARY_DIR}/fuzz;FUZZ_SECONDS=15;JOBS=2")
