"""For the DaCe VS Code extension: point its custom-transformations setting
(`dace.optimization.customTransformationsPaths`) or its "Load Custom Transformations"
command at this file. Importing the package registers `InlineFuser`, `VerticalWindow`,
`WriteBackToMap`, `WriteBackRetarget`, `OutputAsBuffer`, `InPlaceUpdate`, `NestedColumnRead`,
`SweepPairFusion`, `CopyIntoReaders` and `ProvenCopyChainRemover` with DaCe's pattern matcher, so the extension's Transformations
list shows them."""

from gt4py_dace_xforms import InlineFuser, ProvenCopyChainRemover, WriteBackToMap  # noqa: F401
