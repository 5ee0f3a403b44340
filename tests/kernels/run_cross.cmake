# cmake -P script: builds tests/kernels/cross with a cross compiler and runs it under an emulator.
#   -DNUCLEUS_SOURCE= -DWORK= -DCOMPILER= -DFLAGS= -DEMULATOR= -DCATCH2_INCLUDE= [-DEMULATOR_ARGS=]
#   [-DREQUIRE=neon;sve256]
# EMULATOR_ARGS: one string ("-cpu max,sve256=on"); REQUIRE: the targets that must have run (default
# neon). The test prints which targets it ran.
cmake_policy(SET CMP0057 NEW)
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${NUCLEUS_SOURCE}/tests/kernels/cross -B ${WORK}
                        -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 -DCMAKE_BUILD_TYPE=Release
                        -DCMAKE_CXX_COMPILER=${COMPILER} "-DCMAKE_CXX_FLAGS=${FLAGS}" -DCATCH2_INCLUDE=${CATCH2_INCLUDE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure failed: ${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK} --parallel 1 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "build failed: ${out}\n${err}")
endif()
# The output goes to a file and is read line by line: with --success it runs to many megabytes, and
# a regex over it as one string takes cmake minutes.
separate_arguments(emulator_args UNIX_COMMAND "${EMULATOR_ARGS}")
execute_process(COMMAND ${EMULATOR} ${emulator_args} ${WORK}/nucleus_kernels_cross --success --reporter compact
                RESULT_VARIABLE rc OUTPUT_FILE ${WORK}/output.txt ERROR_VARIABLE err)
file(STRINGS ${WORK}/output.txt target_lines REGEX "target [a-z0-9]+")
set(targets)
foreach(line IN LISTS target_lines)
  string(REGEX MATCHALL "target [a-z0-9]+" found "${line}")
  list(APPEND targets ${found})
endforeach()
list(REMOVE_DUPLICATES targets)
file(STRINGS ${WORK}/output.txt summary REGEX "(Passed all|Passed [0-9]|Failed)")
message("targets run: ${targets}\n${summary}")
if(NOT rc EQUAL 0)
  file(STRINGS ${WORK}/output.txt failures REGEX "failed")
  list(JOIN failures "\n" failures)
  message(FATAL_ERROR "kernel tests failed under the emulator (${rc}):\n${failures}\n${err}")
endif()
if(NOT REQUIRE)
  set(REQUIRE neon)
endif()
foreach(t IN LISTS REQUIRE)
  if(NOT "target ${t}" IN_LIST targets)
    message(FATAL_ERROR "the ${t} target did not run")
  endif()
endforeach()
