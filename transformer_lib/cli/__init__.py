"""The command lines: ``python -m transformer_lib.train`` and ``python -m transformer_lib.translate``
(thin entry points in the package's top level run :mod:`.train` and :mod:`.translate`).
Tools around the model: they import the package; the package never imports them."""
