"""The command lines: ``python -m transformer_lib.train``, ``translate``, ``corpus`` (write the
English->French splits) and ``export`` (keep what translates). Each command is a thin
entry point in the package's top level, ``transformer_lib/<name>.py`` (what ``python -m``
runs), and a module here, ``cli/<name>_command.py`` (what it does): :mod:`.train_command`,
:mod:`.translate_command`, :mod:`.corpus_command` and :mod:`.export_command`.
Tools around the model: they import the package; the package never imports them."""
