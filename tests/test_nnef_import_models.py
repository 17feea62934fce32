"""Whole NNEF 1.x networks written in the test (an AlexNet-like CNN and a small ResNet-like network with
batch normalization, separable convolutions and a custom fragment), imported and run against the nnef
reference executor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from nnef_oracle import reference, write_graph

import skriptnd
from skriptnd.interop.nnef_import import import_nnef

RNG = np.random.default_rng(7)


def _weights(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    out = {}
    for label, shape in shapes.items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        out[label] = (RNG.standard_normal(shape) / np.sqrt(max(fan_in, 1))).astype(np.float32)
    return out


def _variables(shapes: dict[str, tuple[int, ...]]) -> str:
    return "".join(f"    {label.replace('/', '_')} = variable(shape = {list(shape)}, label = '{label}');\n"
                   for label, shape in shapes.items())


ALEX = {
    "conv1/filter": (16, 3, 7, 7), "conv1/bias": (1, 16), "conv2/filter": (24, 16, 5, 5), "conv2/bias": (1, 24),
    "conv3/filter": (32, 24, 3, 3), "conv3/bias": (1, 32), "conv4/filter": (32, 16, 3, 3), "conv4/bias": (1, 32),
    "fc1/filter": (64, 32 * 4 * 4), "fc1/bias": (1, 64), "fc2/filter": (10, 64), "fc2/bias": (1, 10),
}


def test_alexnet_like(tmp_path: Path) -> None:
    text = ("graph AlexNetLike( image ) -> ( prob )\n{\n    image = external(shape = [2, 3, 63, 63]);\n"
            + _variables(ALEX) + """
    c1 = relu(conv(image, conv1_filter, conv1_bias, stride = [4, 4], padding = [(2, 2), (2, 2)]));
    n1 = local_response_normalization(c1, size = [1, 5, 1, 1], alpha = 0.0001, beta = 0.75, bias = 1.0);
    p1 = max_pool(n1, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'ignore', padding = []);
    c2 = relu(conv(p1, conv2_filter, conv2_bias, padding = []));
    p2 = max_pool(c2, size = [1, 1, 3, 3], stride = [1, 1, 2, 2], border = 'ignore');
    c3 = relu(conv(p2, conv3_filter, conv3_bias, padding = []));
    c4 = relu(conv(c3, conv4_filter, conv4_bias, padding = [], groups = 2));
    p4 = avg_pool(c4, size = [1, 1, 2, 2], stride = [1, 1, 1, 1], border = 'constant', padding = []);
    f = reshape(p4, shape = [0, -1]);
    h = relu(linear(f, fc1_filter, fc1_bias));
    prob = softmax(linear(h, fc2_filter, fc2_bias));
}
""")
    _compare(tmp_path, text, ALEX, (2, 3, 63, 63))


RES = {
    "stem/w": (8, 3, 3, 3), "stem/mean": (1, 8), "stem/var": (1, 8), "stem/beta": (1, 8), "stem/gamma": (1, 8),
    "b1/w1": (8, 8, 3, 3), "b1/w2": (8, 8, 3, 3), "b2/plane": (8, 1, 3, 3), "b2/point": (16, 8, 1, 1),
    "b2/bias": (1, 16), "b2/proj": (16, 8, 1, 1), "b2/alpha": (1, 16), "head/w": (5, 16), "head/b": (1, 5),
}


def test_resnet_like_with_custom_fragment(tmp_path: Path) -> None:
    text = ("""extension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;

fragment bn_relu( x: tensor<scalar>, mean: tensor<scalar>, var: tensor<scalar>, beta: tensor<scalar>,
                  gamma: tensor<scalar>, eps: scalar = 1e-5 ) -> ( y: tensor<scalar> )
{
    y = relu(batch_normalization(x, mean, var, beta, gamma, epsilon = eps));
}

graph ResNetLike( image ) -> ( logits )
{
    image = external(shape = [2, 3, 16, 16]);
""" + _variables(RES) + """
    s = bn_relu(conv(image, stem_w, 0.0, padding = []), stem_mean, stem_var, stem_beta, stem_gamma, eps = 1e-3);
    r1 = relu(conv(s, b1_w1, 0.0, padding = []));
    r2 = conv(r1, b1_w2, 0.0, padding = []);
    o1 = relu(add(s, r2));
    t = separable_conv(o1, b2_plane, b2_point, b2_bias, stride = [2, 2], padding = []);
    sc = conv(o1, b2_proj, 0.0, stride = [2, 2], padding = [(0, 0), (0, 0)]);
    o2 = prelu(add(t, sc), b2_alpha);
    g = mean_reduce(o2, axes = [2, 3]);
    logits = linear(reshape(g, shape = [2, 16]), head_w, head_b);
}
""")
    weights = _weights(RES)
    for label in ("stem/var",):
        weights[label] = np.abs(weights[label]) + 0.5
    out = _compare(tmp_path, text, RES, (2, 3, 16, 16), weights)
    assert "nn.prelu" in (out / "main.sknd").read_text()


def _compare(tmp_path: Path, text: str, shapes: dict, input_shape: tuple[int, ...],
             weights: dict | None = None) -> Path:
    src = write_graph(tmp_path / "nnef", text, weights or _weights(shapes))
    out = import_nnef(src, tmp_path / "sknd")
    x = RNG.standard_normal(input_shape).astype(np.float32)
    graph = skriptnd.load(out).compose()
    [arg] = [t.name for t in graph.inputs]
    assert arg == "image"  # a standard module's name is a valid tensor name: kept
    got = skriptnd.run(graph, {arg: x})
    want = reference(src, [x])[0]
    actual = next(iter(got.values()))
    assert actual.shape == want.shape
    np.testing.assert_allclose(actual, want, rtol=1e-4, atol=1e-5)
    return out

