"""Train the `Digits` CNN (models/digits/main.sknd) on scikit-learn's handwritten digits, in plain numpy.

    python models/digits/train.py

The data set is the one scikit-learn ships (`sklearn.datasets.load_digits()`: 1797 grey 8x8 images
with values 0..16, ten classes), so nothing is downloaded. Images are scaled to [0, 1] (divided by
16) and split with `train_test_split(test_size=0.2, random_state=0, stratify=y)`: 1437 images to
train on, 360 to test on.

The network, NCHW throughout:

    image  real[batch,1,8,8]
    conv1  3x3, 8 channels, padding 1 (before and after)  -> [batch,8,8,8]     + relu
    pool1  max 2x2, stride 2                               -> [batch,8,4,4]
    conv2  3x3, 16 channels, padding 1                     -> [batch,16,4,4]   + relu
    pool2  max 2x2, stride 2                               -> [batch,16,2,2]
    flatten from axis 1 (row-major: c*4 + h*2 + w)         -> [batch,64]
    linear 64 -> 10, y = x W^T + b with W [10,64]          -> [batch,10]
    softmax over axis 1                                    -> probabilities [batch,10]

`forward` follows the conventions of the SkriptND standard library operators that main.sknd uses,
so that the graph and this script compute the same function:

* `nn.conv` is a cross-correlation (no filter flip); data NCX, filter [out, in, kh, kw]
  (filter_format 'NCX'); `output[b,n,i] += input[b,c,stride*i + j - offset] * filter[n,c,j]`
  where `offset` is the "before" padding, padded positions reading as 0; bias added per channel.
* `nn.max_pool` pools axes [2:d] (H and W for a 4-d input) with window `size` and `stride`;
  with size 2, stride 2 and an even extent there is no padding.
* `layout.flatten{axis=1}` flattens C, H, W in row-major order.
* `nn.linear` has filter [n, c] (out, in): `output[b,n] = bias[n] + sum_c input[b,c] * filter[n,c]`.
* `nn.softmax` normalises over axes [1]: exp(x - max) / sum(exp(x - max)).

Training: Adam (lr 0.003, betas 0.9/0.999), mini-batches of 32, 40 epochs, cross-entropy loss, He
initialisation, everything seeded (numpy `default_rng(0)`), so a rerun gives the same weights.

Outputs, beside main.sknd (this script's folder):

* `main.Digits.<variable>.dat`: the weights as float32 NNEF tensor files
  (`skriptnd.io.write_tensor`), one per variable of the graph (naming
  `<module>.<graph>.<variable>.dat`, which `skriptnd.load` reads);
* `samples/<d>.npy`: one test image per digit d = 0..9 (float32 [1,1,8,8], already scaled), and
  `samples/labels.json` mapping each file name to its true label;
* `reference_accuracy.json`: this numpy model's accuracy on the test split (with the float32
  weights as written), and the split parameters;
* `calibration.npz`: the first 200 training images (member `image`, float32 [200,1,8,8]), calibration
  data for `sknd quantize` (docs/quantize.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
MODULE, GRAPH = "main", "Digits"

#: Split and scaling, shared with tests/test_digits.py.
TEST_SIZE = 0.2
SPLIT_SEED = 0
SCALE = 16.0

SEED = 0
EPOCHS = 40
BATCH = 32
LEARNING_RATE = 3e-3

#: The graph's variables and their shapes (main.sknd's @variable block).
SHAPES: dict[str, tuple[int, ...]] = {
    "conv1_filter": (8, 1, 3, 3),
    "conv1_bias": (8,),
    "conv2_filter": (16, 8, 3, 3),
    "conv2_bias": (16,),
    "fc_filter": (10, 64),
    "fc_bias": (10,),
}

Params = dict[str, np.ndarray]


# ------------------------------------------------------------------------------------- data


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, x_test, y_train, y_test): images float32 [n,1,8,8] scaled to [0,1], labels int64."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images.astype(np.float32) / np.float32(SCALE)).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=TEST_SIZE, random_state=SPLIT_SEED,
                                                        stratify=y)
    return x_train, x_test, y_train, y_test


# ---------------------------------------------------------------------------------- forward


def _im2col(x: np.ndarray, k: int = 3, pad: int = 1) -> np.ndarray:
    """[n,c,h,w] -> [n, c*k*k, h*w] patches for a stride-1 'same' cross-correlation.

    Column (c, ki, kj) of output position (i, j) holds x[c, i + ki - pad, j + kj - pad] (0 outside),
    i.e. nn.conv's `input[b, c, stride*i + dilation*j - offset]` with stride 1, dilation 1,
    offset = pad.
    """
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((n, c, k, k, h, w), dtype=x.dtype)
    for ki in range(k):
        for kj in range(k):
            cols[:, :, ki, kj] = xp[:, :, ki:ki + h, kj:kj + w]
    return cols.reshape(n, c * k * k, h * w)


def _col2im(cols: np.ndarray, shape: tuple[int, ...], k: int = 3, pad: int = 1) -> np.ndarray:
    """Adjoint of `_im2col`: scatter-add patch gradients back onto the [n,c,h,w] input."""
    n, c, h, w = shape
    cols = cols.reshape(n, c, k, k, h, w)
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=cols.dtype)
    for ki in range(k):
        for kj in range(k):
            xp[:, :, ki:ki + h, kj:kj + w] += cols[:, :, ki, kj]
    return xp[:, :, pad:pad + h, pad:pad + w]


def conv(x: np.ndarray, filt: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """nn.conv{padding=[1,1,1,1]}: NCHW, filter [out,in,3,3], cross-correlation; returns (y, cols)."""
    n, _, h, w = x.shape
    cols = _im2col(x)
    y = np.einsum("ok,nkp->nop", filt.reshape(filt.shape[0], -1), cols) + bias[None, :, None]
    return y.reshape(n, filt.shape[0], h, w), cols


def max_pool(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """nn.max_pool{size=[2,2], stride=[2,2]} over axes [2,3]; returns (y, argmax within each window)."""
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
    arg = windows.argmax(axis=-1)
    return np.take_along_axis(windows, arg[..., None], axis=-1)[..., 0], arg


def softmax(z: np.ndarray) -> np.ndarray:
    """nn.softmax (axes [1]): exp(z - max) / sum(exp(z - max))."""
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def forward(params: Params, x: np.ndarray, cache: dict[str, Any] | None = None) -> np.ndarray:
    """Probabilities [n,10] for images [n,1,8,8] (scaled to [0,1]); the function main.sknd's Digits computes.

    Computes in the dtype of `x` and the parameters (float32 for the exported model). With a
    `cache` dict, keeps the intermediates `backward` needs.
    """
    c1, cols1 = conv(x, params["conv1_filter"], params["conv1_bias"])
    r1 = np.maximum(c1, 0)
    p1, arg1 = max_pool(r1)
    c2, cols2 = conv(p1, params["conv2_filter"], params["conv2_bias"])
    r2 = np.maximum(c2, 0)
    p2, arg2 = max_pool(r2)
    flat = p2.reshape(p2.shape[0], -1)
    logits = flat @ params["fc_filter"].T + params["fc_bias"]
    probs = softmax(logits)
    if cache is not None:
        cache.update(x=x, cols1=cols1, c1=c1, p1=p1, arg1=arg1, cols2=cols2, c2=c2, p2=p2, arg2=arg2,
                     flat=flat, probs=probs)
    return probs


def predict(params: Params, x: np.ndarray, batch: int = 256) -> np.ndarray:
    return np.concatenate([forward(params, x[i:i + batch]).argmax(axis=1) for i in range(0, len(x), batch)])


# --------------------------------------------------------------------------------- backward


def _max_pool_backward(dy: np.ndarray, arg: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, c, h, w = shape
    dwin = np.zeros((n, c, h // 2, w // 2, 4), dtype=dy.dtype)
    np.put_along_axis(dwin, arg[..., None], dy[..., None], axis=-1)
    return dwin.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, w)


def _conv_backward(dy: np.ndarray, cols: np.ndarray, filt: np.ndarray, shape: tuple[int, ...]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients (d input, d filter, d bias) of `conv` given d output [n,o,h,w]."""
    n, o = dy.shape[:2]
    dy = dy.reshape(n, o, -1)
    dfilt = np.einsum("nop,nkp->ok", dy, cols).reshape(filt.shape)
    dbias = dy.sum(axis=(0, 2))
    dcols = np.einsum("ok,nop->nkp", filt.reshape(o, -1), dy)
    return _col2im(dcols, shape), dfilt, dbias


def loss_and_grads(params: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
    """Mean cross-entropy of the softmax outputs against labels y, and its gradients."""
    cache: dict[str, Any] = {}
    probs = forward(params, x, cache)
    n = len(y)
    loss = float(-np.log(probs[np.arange(n), y] + 1e-12).mean())

    dlogits = probs.copy()
    dlogits[np.arange(n), y] -= 1.0
    dlogits /= n
    grads: Params = {
        "fc_filter": dlogits.T @ cache["flat"],
        "fc_bias": dlogits.sum(axis=0),
    }
    dp2 = (dlogits @ params["fc_filter"]).reshape(cache["p2"].shape)
    dr2 = _max_pool_backward(dp2, cache["arg2"], cache["c2"].shape)
    dc2 = dr2 * (cache["c2"] > 0)
    dp1, grads["conv2_filter"], grads["conv2_bias"] = _conv_backward(dc2, cache["cols2"], params["conv2_filter"],
                                                                     cache["p1"].shape)
    dr1 = _max_pool_backward(dp1, cache["arg1"], cache["c1"].shape)
    dc1 = dr1 * (cache["c1"] > 0)
    _, grads["conv1_filter"], grads["conv1_bias"] = _conv_backward(dc1, cache["cols1"], params["conv1_filter"],
                                                                   cache["x"].shape)
    return loss, grads


# --------------------------------------------------------------------------------- training


def init_params(rng: np.random.Generator) -> Params:
    """He-normal filters (fan-in = in * kh * kw, or in for the linear layer), zero biases; float64."""
    params: Params = {}
    for name, shape in SHAPES.items():
        if name.endswith("_bias"):
            params[name] = np.zeros(shape)
        else:
            fan_in = int(np.prod(shape[1:]))
            params[name] = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    return params


def train(x: np.ndarray, y: np.ndarray, *, epochs: int = EPOCHS, seed: int = SEED, verbose: bool = True
          ) -> Params:
    """Adam on mini-batches, in float64; returns the trained parameters (float64)."""
    rng = np.random.default_rng(seed)
    params = init_params(rng)
    x = x.astype(np.float64)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    step = 0
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total = 0.0
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            loss, grads = loss_and_grads(params, x[idx], y[idx])
            total += loss * len(idx)
            step += 1
            for k in params:
                m[k] = beta1 * m[k] + (1 - beta1) * grads[k]
                v[k] = beta2 * v[k] + (1 - beta2) * grads[k] ** 2
                m_hat = m[k] / (1 - beta1 ** step)
                v_hat = v[k] / (1 - beta2 ** step)
                params[k] -= LEARNING_RATE * m_hat / (np.sqrt(v_hat) + eps)
        if verbose and (epoch + 1) % 5 == 0:
            acc = float((predict(params, x) == y).mean())
            print(f"epoch {epoch + 1:3d}: loss {total / len(x):.4f}, train accuracy {acc:.4f}")
    return params


# ----------------------------------------------------------------------------------- export


def weight_file(folder: Path, name: str) -> Path:
    return folder / f"{MODULE}.{GRAPH}.{name}.dat"


def save_weights(params: Params, folder: Path = HERE) -> None:
    from skriptnd.io import write_tensor

    for name, shape in SHAPES.items():
        array = np.ascontiguousarray(params[name], dtype=np.float32)
        assert array.shape == shape, (name, array.shape, shape)
        write_tensor(weight_file(folder, name), array)


def load_weights(folder: Path = HERE) -> Params:
    """The exported float32 weights, by variable name."""
    from skriptnd.io import read_tensor

    return {name: read_tensor(weight_file(folder, name)) for name in SHAPES}


def save_samples(params: Params, x_test: np.ndarray, y_test: np.ndarray, folder: Path = HERE / "samples") -> None:
    """One test image per digit: the first one of that class in the test split the model gets right."""
    folder.mkdir(parents=True, exist_ok=True)
    predicted = predict(params, x_test)
    labels: dict[str, int] = {}
    for digit in range(10):
        hits = np.flatnonzero((y_test == digit) & (predicted == digit))
        index = int(hits[0]) if len(hits) else int(np.flatnonzero(y_test == digit)[0])
        name = f"{digit}.npy"
        np.save(folder / name, x_test[index:index + 1].astype(np.float32), allow_pickle=False)
        labels[name] = digit
    (folder / "labels.json").write_text(json.dumps(labels, indent=2) + "\n")


def save_calibration(x_train: np.ndarray, count: int = 200, path: Path = HERE / "calibration.npz") -> None:
    """Calibration samples for `sknd quantize models/digits --calibration models/digits/calibration.npz`:
    training images (never the test split the accuracy is measured on)."""
    np.savez_compressed(path, image=x_train[:count].astype(np.float32))


def main() -> None:
    x_train, x_test, y_train, y_test = load_split()
    print(f"train {len(x_train)} images, test {len(x_test)} images")
    trained = train(x_train, y_train)
    params = {k: v.astype(np.float32) for k, v in trained.items()}  # what the graph will run with
    save_weights(params)
    params = load_weights()
    correct = int((predict(params, x_test) == y_test).sum())
    accuracy = correct / len(y_test)
    print(f"test accuracy {accuracy:.4f} ({correct}/{len(y_test)})")
    save_samples(params, x_test, y_test)
    save_calibration(x_train)
    reference = {
        "test_accuracy": round(accuracy, 6),
        "test_correct": correct,
        "test_count": len(y_test),
        "train_count": len(y_train),
        "dataset": "sklearn.datasets.load_digits",
        "scaling": "images / 16.0, float32, shape [n,1,8,8]",
        "split": {"function": "sklearn.model_selection.train_test_split", "test_size": TEST_SIZE,
                  "random_state": SPLIT_SEED, "stratify": "y"},
        "training": {"optimizer": "adam", "learning_rate": LEARNING_RATE, "epochs": EPOCHS, "batch": BATCH,
                     "seed": SEED},
    }
    (HERE / "reference_accuracy.json").write_text(json.dumps(reference, indent=2) + "\n")
    if accuracy < 0.95:
        raise SystemExit(f"test accuracy {accuracy:.4f} is below 0.95")


if __name__ == "__main__":
    main()
