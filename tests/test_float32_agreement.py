"""The float32 target of examples/compare_with_pytorch.py is relative to the size of the values
(checked without PyTorch: the rule lives in examples/float32_agreement.py)."""
import os

from examples_loader import load_example

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(name):
    return load_example(name)


def test_a_trained_models_logits_are_judged_at_their_size():
    """The README's trained model: logits up to 12.3 differing by 1.17e-5 (about a dozen float32
    steps at that size) are within the target; the same difference on values below 1 is not."""
    agreement = load("float32_agreement")
    within, line = agreement.verdict([agreement.Difference("logits", 1.17e-5, 12.3),
                                      agreement.Difference("encoder layer 0", 9.5e-7, 4.0)])
    assert within and "within" in line and "logits" in line and "1.23e-04" in line
    within, line = agreement.verdict([agreement.Difference("logits", 1.17e-5, 12.3),
                                      agreement.Difference("d loss / d logits", 1.17e-5, 0.5)])
    assert not within and "ABOVE" in line and "d loss / d logits" in line


def test_the_comparison_script_uses_that_rule():
    source = open(os.path.join(REPO, "examples", "compare_with_pytorch.py"), encoding="utf-8").read()
    assert "from float32_agreement import" in source and "largest <= TOLERANCE" not in source
