"""emolia-bench: human-agreement analysis and model scoring for emotional-speech benchmarks.

The package is plain functions over DataFrames, organised by concept:

- ``subsets``   the two subsets described once, as data
- ``io``        loaders that validate at the boundary, atomic writers, strict JSON
- ``anonymize`` username replacement with a stable map
- ``labels``    cleaning, majority vote, benchmark labels and slice tables
- ``agreement`` inter-rater agreement and the human upper bound
- ``metrics``   classification metrics of a model against the labels
- ``scorers``   the registry of model backends (sham, endpoint, ...)
- ``reports``   markdown reports
"""

__version__ = "0.1.0"
