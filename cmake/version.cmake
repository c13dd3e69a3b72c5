# Writes the generated core/version.hpp with the commit of the source tree at build time (not
# at configure time, which goes stale as commits land), "-dirty" when tracked files differ
# from it, "unknown" outside a git checkout. configure_file leaves the file alone when nothing
# changed, so an unchanged commit recompiles nothing.
# Inputs: SRC (version.hpp.in), DST, SOURCE_DIR, PROJECT_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE TACO_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT TACO_GIT_COMMIT)
  set(TACO_GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty
                  ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND TACO_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file(${SRC} ${DST} @ONLY)
