"""The four special tokens, at the same ids in every tokenizer of the package.

``PAD_ID = 0`` ``"<pad>"`` fills the rows of a batch up to its longest sequence (and is never
attended to, :func:`~transformer_lib.masks.padding_mask`), ``BOS_ID = 1`` ``"<s>"`` starts
every decoder input, ``EOS_ID = 2`` ``"</s>"`` ends every target, and ``UNK_ID = 3``
``"<unk>"`` stands for a character the training texts never held.
"""

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # index in this tuple == id
