"""What a page runs the model on: a date (the date models) or a sentence of the generated
language (the next-word model), typed on the command line or in the served page.

``subject_for(model, text)`` checks the text (``InputError``, one line, for anything else)
and returns an object with what the step, the heatmaps and the check need: the model's
inputs, the tokens along each attention kind's axes, and what the model predicts.

A date runs teacher-forced on its correct answer, so the decoder's row t reads the answer
shifted right by one (``<sos>`` first) and predicts the answer's character t. A sentence
runs as ``<bos>`` and its words, and the prediction is the word after the last one.
"""
import numpy as np

from transformer.tasks import language
from transformer.tasks.dates import DateError
from transformer.decoding import inference

from ..inputs import axis_labels, decoder_input_from_greedy, is_decoder_only, reference_inputs, source_ids

MAX_TEXT = 200           # characters: a date is 10, the longest sentence about 90


class InputError(ValueError):
    """Typed input the model cannot run on, in one line."""


def task_of(model) -> str:
    return getattr(model.config, "task", "dates")


class DateSubject:
    kind = "date"

    def __init__(self, date: str):
        self.text = date

    def inputs(self, model) -> tuple:
        return reference_inputs(model, self.text)

    def labels(self, model, inputs, kind) -> tuple:
        return axis_labels(model, inputs, kind)

    def prediction(self, model) -> dict:
        """The model's own answer, decoded greedily."""
        from transformer.tasks.dates import decode
        ids = decoder_input_from_greedy(model, source_ids(self.text))[0, 1:]
        return {"text": decode(ids)}


class SentenceSubject:
    kind = "sentence"
    TOP = 5              # the most likely next words shown

    def __init__(self, words):
        self.words = list(words)
        self.text = " ".join(self.words)

    def inputs(self, model) -> tuple:
        return (np.array([[language.BOS] + language.encode(self.words)], dtype=np.int64),)

    def labels(self, model, inputs, kind) -> tuple:
        tokens = [language.VOCAB[i] for i in inputs[0][0]]
        return tokens, tokens

    def prediction(self, model) -> dict:
        """The next word's most likely choices and their probabilities."""
        with inference(model):
            logits = model(*self.inputs(model)).data[0, -1].astype(np.float64)
        logits[[language.PAD, language.BOS]] = -np.inf            # never a word to write
        p = np.exp(logits - logits.max())
        p /= p.sum()
        top = np.argsort(-p)[:self.TOP]
        return {"text": language.VOCAB[top[0]], "words": [[language.VOCAB[i], round(float(p[i]), 4)] for i in top]}


def subject_for(model, text):
    """A checked ``DateSubject`` or ``SentenceSubject`` for ``model``; InputError otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("type a date (YYYY-MM-DD)" if task_of(model) == "dates" else
                         "type a sentence of the language, e.g. 'ann is at the mill and lea is at the fort . lea is at the'")
    if len(text) > MAX_TEXT:
        raise InputError(f"the input is {len(text):,} characters; at most {MAX_TEXT} (a date or one sentence)")
    if task_of(model) == "dates":
        try:
            source_ids(text.strip())
        except DateError as error:
            raise InputError(str(error)) from None
        return DateSubject(text.strip())
    try:
        words = language.split_words(text)
    except language.LanguageError as error:
        raise InputError(str(error)) from None
    if len(words) + 1 > model.config.max_len:
        raise InputError(f"the sentence has {len(words)} words; this model reads at most {model.config.max_len - 1}")
    return SentenceSubject(words)


def as_subject(model, subject):
    """A subject, or a text (a date for the date models) made into one."""
    return subject if hasattr(subject, "inputs") else subject_for(model, subject)


def is_next_word(model) -> bool:
    return is_decoder_only(model) and task_of(model) == "next-word"
