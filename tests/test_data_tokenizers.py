"""Tokenizers: round trips, fixed special ids, unknown characters, JSON-safe to_dict."""

import json

import pytest
import torch

from transformer_lib.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    BPETokenizer,
    CharTokenizer,
    tokenizer_from_dict,
)

TEXTS = [
    "Saturday, 5 March 2021",
    "5th of march, 2021",
    "2021-03-05",
    "samedi 5 mars 2021",
    "5. März 2021",
    "sábado, 5 de marzo de 2021",
]
CORPUS = [
    "the cat sat on the mat",
    "the dog ate the hat",
    "a cat and a dog",
    "le chat est sur le tapis",
    "der Hund frisst den Hut",
    "el gato y el perro",
    "the mat is on the floor",
    "très bien, merci",
] * 20


@pytest.fixture
def bpe(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    lines = path.read_text(encoding="utf-8").splitlines()
    return BPETokenizer.train(lines, vocab_size=120)


def test_char_round_trip_and_specials():
    tok = CharTokenizer.train(TEXTS)
    assert [tok.id_to_token(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert (
        (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id)
        == (0, 1, 2, 3)
        == (PAD_ID, BOS_ID, EOS_ID, UNK_ID)
    )
    assert tok.vocab_size == 4 + len(set("".join(TEXTS)))
    for text in TEXTS:
        ids = tok.encode(text, add_bos=True, add_eos=True)
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID and len(ids) == len(text) + 2
        assert min(ids[1:-1]) >= 4  # no specials inside
        assert tok.decode(ids) == text
        assert tok.decode(torch.tensor(ids)) == text  # tensors accepted
    assert tok.decode([BOS_ID, 4, EOS_ID, PAD_ID], skip_special=False).startswith("<s>")


def test_char_unknown_characters_map_to_unk():
    tok = CharTokenizer.train(["abc"])
    assert tok.encode("aZc") == [tok.encode("a")[0], UNK_ID, tok.encode("c")[0]]
    assert tok.decode(tok.encode("aZc")) == "ac"
    assert tok.decode(tok.encode("aZc"), skip_special=False) == "a<unk>c"


def test_char_training_is_order_independent():
    assert CharTokenizer.train(TEXTS).to_dict() == CharTokenizer.train(TEXTS[::-1]).to_dict()


def test_bpe_specials_round_trip_and_merges(bpe):
    assert [bpe.id_to_token(i) for i in range(4)] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert bpe.vocab_size <= 120
    for text in ["the cat sat on the mat", "le chat est  sur le tapis", "très bien"]:
        ids = bpe.encode(text, add_bos=True, add_eos=True)
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID
        assert bpe.decode(ids) == text
    # merges learned: a frequent word is fewer tokens than characters
    assert len(bpe.encode("the cat")) < len("the cat")


def test_bpe_unknown_characters_and_literal_specials(bpe):
    ids = bpe.encode("the ωcat")  # omega never seen in training
    assert UNK_ID in ids
    ids = bpe.encode("the <s> cat")  # text "<s>" is not the BOS token
    assert BOS_ID not in ids


@pytest.mark.parametrize("make", [lambda b: CharTokenizer.train(TEXTS), lambda b: b])
def test_to_dict_round_trip_through_json(make, bpe):
    tok = make(bpe)
    d = json.loads(json.dumps(tok.to_dict()))  # JSON-safe
    again = tokenizer_from_dict(d)
    assert type(again) is type(tok) and again.vocab_size == tok.vocab_size
    for text in ["the cat", "5 March 2021", "ωx"]:
        assert again.encode(text, add_eos=True) == tok.encode(text, add_eos=True)
    ids = tok.encode("the cat sat")
    assert again.decode(ids) == tok.decode(ids)


def test_bad_input_names_the_argument(bpe):
    with pytest.raises(TypeError, match="texts"):
        CharTokenizer.train("abc")
    with pytest.raises(ValueError, match="texts"):
        CharTokenizer.train([])
    with pytest.raises(TypeError, match="text"):
        CharTokenizer.train(["a"]).encode(5)
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer.train(["a b"], vocab_size=3)
    with pytest.raises(ValueError, match="ids"):
        bpe.decode([10**6])
    with pytest.raises(TypeError, match="ids"):
        CharTokenizer.train(["a"]).decode("abc")
    with pytest.raises(ValueError, match="kind"):
        tokenizer_from_dict({"kind": "wordpiece"})
    with pytest.raises(TypeError, match="d"):
        tokenizer_from_dict([1, 2])
