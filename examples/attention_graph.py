"""Draw the computation graph of one attention step (writes .dot, and .svg when Graphviz is installed).

Runs `dates-attention-graph` without installing: python examples/attention_graph.py --help
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from transformer.commands.attention_graph import main as attention_graph_main  # noqa: E402


def main(argv=None) -> int:
    return attention_graph_main(argv)


if __name__ == "__main__":
    sys.exit(main())
