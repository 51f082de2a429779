"""The cuDNN LSTM of TensorFlow 1.x's ``tf.contrib.cudnn_rnn.CudnnLSTM`` in standard ops, for the
CPU: the authors' ``tylib/lib/func.py`` calls it once per direction with ``num_layers = 1``.

It keeps what the optimiser sees of the original, not only the forward function:

* the equations of cuDNN's LSTM (NVIDIA's cuDNN guide, ``CUDNN_LSTM``): per gate an input
  matrix ``W``, a recurrent matrix ``R`` and *two* biases ``bW + bR``; no forget-gate offset;
  ``c = f * c + i * tanh(g)``, ``h = o * tanh(c)``;
* no sequence lengths: the time-major input is run over every step, padding included, as the
  authors' call passes none (their backward direction reverses each sequence first);
* one variable ``opaque_kernel`` holding every weight and both biases, as the contrib layer
  has: the authors' L2 term skips variables named ``bias`` and their clipping is per variable,
  so splitting it would change both;
* the contrib layer's initialisation: ``kernel_initializer`` called once per canonical matrix,
  ``[num_units, input_size]`` x 4 then ``[num_units, num_units]`` x 4, biases zero.

The order of the four gates inside the buffer differs from cuDNN's opaque layout, which no
computation here depends on: every gate's blocks are drawn from one distribution, and the L2
term, the clipping norm and Adam treat the buffer's entries alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow.compat.v1 as tf

GATES = 4  # input, forget, cell candidate, output


class CudnnLSTM:
    """``CudnnLSTM(1, num_units, kernel_initializer=...)``, called as ``outputs, (h, c) =
    lstm(inputs [T, B, D], initial_state=(h0, c0))`` with states ``[1, B, units]``."""

    def __init__(self, num_layers: int, num_units: int,
                 kernel_initializer: Callable[..., Any] | None = None) -> None:
        if num_layers != 1:
            raise ValueError(f"only num_layers = 1 is implemented (the authors' only use), "
                             f"got {num_layers}")
        self.num_units = num_units
        self.kernel_initializer = kernel_initializer or tf.glorot_uniform_initializer()
        self.input_size = 0
        self.kernel: tf.Variable | None = None

    @property
    def canonical_weight_shapes(self) -> list[tuple[int, int]]:
        units = self.num_units
        return [(units, self.input_size)] * GATES + [(units, units)] * GATES

    def _build(self, input_size: int) -> None:
        self.input_size = input_size
        with tf.variable_scope("cudnn_lstm"):
            weights = [self.kernel_initializer(shape, dtype=tf.float32)
                       for shape in self.canonical_weight_shapes]
            biases = [tf.zeros([self.num_units]) for _ in range(2 * GATES)]
            flat = tf.concat([tf.reshape(t, [-1]) for t in weights + biases], axis=0)
            self.kernel = tf.get_variable("opaque_kernel", initializer=flat)

    def _unpack(self) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """``W [D, 4u]``, ``R [u, 4u]`` and the summed bias ``[4u]`` from the buffer."""
        units, size = self.num_units, self.input_size
        w_len, r_len = GATES * units * size, GATES * units * units
        w = tf.reshape(self.kernel[:w_len], [GATES * units, size])
        r = tf.reshape(self.kernel[w_len: w_len + r_len], [GATES * units, units])
        b = tf.reshape(self.kernel[w_len + r_len:], [2, GATES * units])
        return tf.transpose(w), tf.transpose(r), b[0] + b[1]

    def __call__(self, inputs: tf.Tensor, initial_state: tuple[tf.Tensor, tf.Tensor],
                 training: bool = True) -> tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
        if self.kernel is None:
            self._build(int(inputs.get_shape()[-1]))
        w, r, bias = self._unpack()
        steps, batch = tf.shape(inputs)[0], tf.shape(inputs)[1]
        projected = tf.reshape(tf.matmul(tf.reshape(inputs, [-1, self.input_size]), w) + bias,
                               [steps, batch, GATES * self.num_units])

        def step(state: tuple[tf.Tensor, tf.Tensor], x_t: tf.Tensor
                 ) -> tuple[tf.Tensor, tf.Tensor]:
            h, c = state
            i, f, g, o = tf.split(x_t + tf.matmul(h, r), GATES, axis=1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            return tf.sigmoid(o) * tf.tanh(c), c

        h0, c0 = (tf.reshape(s, [batch, self.num_units]) for s in initial_state)
        hs, cs = tf.scan(step, projected, initializer=(h0, c0))
        return hs, (hs[-1:], cs[-1:])
