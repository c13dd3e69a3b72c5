# Writes the generated core/version.hpp with the commit of the source tree at build time (not
# at configure time, which goes stale as commits land), "-dirty" when tracked files differ
# from it; outside a git checkout the exported commit (below) or "unknown". configure_file
# leaves the file alone when nothing changed, so an unchanged commit recompiles nothing.
# Inputs: SRC (version.hpp.in), DST, SOURCE_DIR, PROJECT_VERSION.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE TACO_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT TACO_GIT_COMMIT)
  # Outside a git checkout: the commit the exporter names (TACO_GIT_COMMIT in the environment, for
  # a copied tree), else the one `git archive` wrote into cmake/git_commit.txt (export-subst in
  # .gitattributes), else "unknown".
  set(TACO_GIT_COMMIT "unknown")
  set(exported "")
  if(EXISTS ${SOURCE_DIR}/cmake/git_commit.txt)
    file(READ ${SOURCE_DIR}/cmake/git_commit.txt exported)
    string(STRIP "${exported}" exported)
  endif()
  if(DEFINED ENV{TACO_GIT_COMMIT} AND NOT "$ENV{TACO_GIT_COMMIT}" STREQUAL "")
    set(TACO_GIT_COMMIT "$ENV{TACO_GIT_COMMIT}")
  elseif(exported MATCHES "^[0-9a-f]+$")
    string(SUBSTRING "${exported}" 0 12 TACO_GIT_COMMIT)
    string(APPEND TACO_GIT_COMMIT "-export")
  endif()
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty
                  ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND TACO_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file(${SRC} ${DST} @ONLY)
