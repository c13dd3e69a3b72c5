#pragma once
// One include for Catch2 2.x (Debian 12) and 3.x (Ubuntu 24.04), so test files stay
// version-neutral.
#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#define TACO_CATCH3 1
using Catch::Approx;
#else
// 2.x declares `using Catch::Detail::Approx;` globally. (`using Catch::Approx` here would name
// the vector matcher Catch::Matchers::Approx, which hides the class.)
#include <catch2/catch.hpp>
#endif
