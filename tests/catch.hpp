#pragma once
// One include for Catch2 2.x (Debian 12) and 3.x (Ubuntu 24.04), so test files stay version-neutral.
#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#define TACO_CATCH3 1
#else
#include <catch2/catch.hpp>
#endif
using Catch::Approx;
