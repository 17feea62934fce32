"""Writes tiny_cnn.onnx beside this script: the model of docs/guide.md's chapter 7, "Bring your PyTorch model".

The guide's tests run without torch, so the repository ships the file this writes. To remake it, run
this with a Python that has torch, onnx and onnxscript: `python docs/examples/make_tiny_cnn.py`.
The class below is the guide's, line for line (tests/test_guide.py checks that they cannot drift).
"""

from pathlib import Path

import onnx
import torch
from torch import nn


class TinyCNN(nn.Module):
    """Classifies a 1x8x8 image into 3 classes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        return self.fc(torch.flatten(x, 1))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyCNN().eval()
    out = Path(__file__).with_name("tiny_cnn.onnx")
    torch.onnx.export(model, (torch.zeros(1, 1, 8, 8),), out, input_names=["image"], output_names=["logits"],
                      dynamo=True, external_data=False, verbose=False)
    # The exporter records where each node came from (this script's absolute path, stack traces):
    # drop that, so the shipped file does not depend on where it was made.
    proto = onnx.load(out)
    for node in proto.graph.node:
        del node.metadata_props[:]
    onnx.save(proto, out)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
