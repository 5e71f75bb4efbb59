"""Data for training and evaluation: tokenizers, the built-in date task, parallel corpora,
and token-sized batches (§5.1)."""

from .batching import Batch, encode_pairs, fits, make_batch, pad_rows, token_batches
from .corpus import read_parallel, write_parallel
from .dates import DATE_FORMATS, LANGUAGES, format_date, make_date_splits
from .tokenizers import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    tokenizer_from_dict,
)

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "SPECIAL_TOKENS",
    "Tokenizer",
    "CharTokenizer",
    "BPETokenizer",
    "tokenizer_from_dict",
    "make_date_splits",
    "format_date",
    "DATE_FORMATS",
    "LANGUAGES",
    "read_parallel",
    "write_parallel",
    "Batch",
    "encode_pairs",
    "fits",
    "make_batch",
    "pad_rows",
    "token_batches",
]
