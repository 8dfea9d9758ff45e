"""MULTIPLY(i, j): the product, as a FLOAT (Dagger's sample function)."""

from jobs.udfs.python_udfs import dagger_function


@dagger_function(returns="float")
def multiply(i, j):
    return i * j
