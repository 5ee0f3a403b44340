// Catch2 runner for tests that compare against fixtures written by make_fixtures.py:
//   nucleus_io_fixture_tests REQUIRED_FILE [catch arguments...]
// exits 77 (ctest's skip) when REQUIRED_FILE is absent, e.g. numpy or gguf were not importable;
// under CI=true an absent fixture fails instead (scripts/deps installs what writes it).
// The fixtures are read from REQUIRED_FILE's folder.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace nucleus_io_test {
std::filesystem::path fixture_dir;  // the folder holding REQUIRED_FILE
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s REQUIRED_FILE [catch arguments...]\n", argv[0]);
    return 2;
  }
  if (!std::filesystem::exists(argv[1])) {
    const char* ci = std::getenv("CI");
    if (ci && std::strcmp(ci, "true") == 0) {
      std::fprintf(stderr, "%s is absent: under CI=true this is a failure, not a skip\n", argv[1]);
      return 1;
    }
    std::fprintf(stderr, "skipping: %s is absent\n", argv[1]);
    return 77;
  }
  nucleus_io_test::fixture_dir = std::filesystem::path(argv[1]).parent_path();
  argv[1] = argv[0];
  return Catch::Session().run(argc - 1, argv + 1);
}
