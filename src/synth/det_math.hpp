#pragma once
// Elementary functions with a fixed recipe: bit-level argument reduction plus fixed
// polynomials evaluated with + - * / only. IEEE double makes every step exactly specified, so
// the results are the same bits on any machine and compiler (given -ffp-contract=off), unlike
// libm, whose last bit may differ between versions. Accuracy: a few ulp (tested against libm).
namespace taco::detmath {

double log(double x);            // natural log; -inf at 0, NaN below 0, +inf at +inf
double exp(double x);            // 0 below about -745, +inf above about 709.78
double expm1(double x);          // exp(x) - 1 without cancellation near 0
double pow(double x, double y);  // x^y for x > 0, as exp(y * log(x))

}  // namespace taco::detmath
