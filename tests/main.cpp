// The Catch2 main every test binary shares. A listener names each failing test case on one line,
// "NUCLEUS_FAILED_CASE: <binary>: <case>", so that a ctest entry that holds a whole binary still says
// which case failed (scripts/test collects these lines after ctest).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace {

struct failed_case_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    if (stats.totals.assertions.failed > 0 || stats.totals.testCases.failed > 0)
      failed.push_back(stats.testInfo.name);
  }
  void testRunEnded(Catch::TestRunStats const& stats) override {
    for (const std::string& name : failed)
      std::printf("NUCLEUS_FAILED_CASE: %s: %s\n", stats.runInfo.name.c_str(), name.c_str());
    std::fflush(stdout);
  }

  std::vector<std::string> failed;
};

}  // namespace

CATCH_REGISTER_LISTENER(failed_case_listener)
