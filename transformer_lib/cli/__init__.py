"""The command lines: ``python -m transformer_lib.train``, ``translate``, ``corpus`` (write the
English->French splits) and ``export`` (keep what translates). Thin entry points in the
package's top level run :mod:`.train`, :mod:`.translate`, :mod:`.corpus` and :mod:`.export`.
Tools around the model: they import the package; the package never imports them."""
