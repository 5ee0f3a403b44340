# cmake -P script: configures and builds consumer/ with one compiler and flag set, then records the
# identity cases with it. Prints the compile command and how long each step took.
#   -DNUCLEUS_SOURCE= -DWORK= -DCOMPILER= -DFLAGS= -DOUT= -DCASES= [-DGENERATOR=] [-DEMULATOR=]
#   [-DEMULATOR_ARGS=] [-DEXPECT_TARGET=]
# With EMULATOR (qemu-aarch64), COMPILER is a cross compiler and the recorder runs under the emulator,
# given EMULATOR_ARGS (one string: "-cpu max,sve256=on"). EXPECT_TARGET: the target the record must
# have run on (its last line names it).
function(run what)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP t1 "%s")
  math(EXPR dt "${t1} - ${t0}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}) after ${dt} s: ${ARGN}\n${out}\n${err}")
  endif()
  message("${what}: ${dt} s")
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
file(REMOVE ${OUT} ${OUT}.skipped)
set(gen)
if(GENERATOR)
  set(gen -G ${GENERATOR})
endif()
# Release, with the optimisation level taken from FLAGS rather than CMake's -O3.
set(cross)
if(EMULATOR)
  set(cross -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64)
endif()
run(configure ${CMAKE_COMMAND} -S ${NUCLEUS_SOURCE}/tests/identity/consumer -B ${WORK} ${gen} ${cross}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-DNDEBUG -DCMAKE_CXX_COMPILER=${COMPILER}
    "-DCMAKE_CXX_FLAGS=${FLAGS}" -DNUCLEUS_SOURCE=${NUCLEUS_SOURCE} -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
file(READ ${WORK}/compile_commands.json commands)
string(JSON command GET "${commands}" 0 command)
message("compile: ${command}")
run(build ${CMAKE_COMMAND} --build ${WORK} --parallel 1)
separate_arguments(emulator_args UNIX_COMMAND "${EMULATOR_ARGS}")
run(record ${EMULATOR} ${emulator_args} ${WORK}/nucleus_record ${OUT} ${CASES})
message("${run_output}")
if(EXPECT_TARGET AND NOT run_output MATCHES "on target ${EXPECT_TARGET}")
  message(FATAL_ERROR "the record did not run on target ${EXPECT_TARGET}")
endif()
