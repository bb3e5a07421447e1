"""Keras 3 on plax: a small convnet trained with ``fit``, saved, loaded back and evaluated.

    python -m plax examples/keras_on_plax.py [--epochs N] [--out DIR] [--model-parallel]

Keras's JAX backend (``KERAS_BACKEND=jax``) runs unchanged with ``jax`` resolving to plax: its
training step is a jitted ``stateless_call`` under ``value_and_grad``. The data is synthetic
(a class is which quadrant of a 16x16 image holds a bright square), so the script needs no
download; it prints the loss per epoch, the test accuracy, and that the model loaded from its
``.keras`` file predicts what the trained one does. With ``--model-parallel`` the model is
spread over every device (``PLAX_NUM_CPU_DEVICES=8`` gives 8 on a CPU) by
``keras.distribution.ModelParallel``: a (batch, model) mesh, each batch split along ``batch``
and the kernels of the second convolution and of the classifier along ``model``.
"""
import argparse
import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

import keras  # noqa: E402


def quadrant_images(n: int, seed: int):
    """``n`` noisy 16x16 images, each with a bright 5x5 square in one quadrant (the label)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    images = rng.normal(0.0, 0.3, (n, 16, 16, 1)).astype("float32")
    for image, label in zip(images, labels):
        row, col = 8 * (label // 2) + rng.integers(0, 4), 8 * (label % 2) + rng.integers(0, 4)
        image[row:row + 5, col:col + 5, 0] += 1.0
    return images, labels


def build_model() -> keras.Model:
    return keras.Sequential([
        keras.Input((16, 16, 1)),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(4, activation="softmax"),
    ])


def use_model_parallelism() -> None:
    """Spread what follows over every device: batches along ``batch``, the named kernels'
    output (or input) features along ``model``."""
    devices = keras.distribution.list_devices()
    model_size = 2 if len(devices) % 2 == 0 else 1
    mesh = keras.distribution.DeviceMesh((len(devices) // model_size, model_size),
                                         ["batch", "model"], devices=devices)
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[".*conv2d_1/kernel"] = (None, None, None, "model")
    layout_map[".*dense/kernel"] = ("model", None)
    keras.distribution.set_distribution(
        keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch"))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--out", default=None, help="where the .keras file goes (a temp dir)")
    parser.add_argument("--model-parallel", action="store_true",
                        help="spread the model over every device (ModelParallel)")
    args = parser.parse_args(argv)
    if args.model_parallel:
        use_model_parallelism()
    keras.utils.set_random_seed(0)
    x_train, y_train = quadrant_images(1024, seed=1)
    x_test, y_test = quadrant_images(256, seed=2)

    model = build_model()
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x_train, y_train, epochs=args.epochs, batch_size=64, verbose=0)
    for epoch, loss in enumerate(history.history["loss"], 1):
        print(f"epoch {epoch}: loss {loss:.4f}")
    if args.model_parallel:
        kernel = model.layers[-1].kernel.value
        print(f"classifier kernel: {kernel.sharding.spec} over {len(kernel.devices())} devices")

    out = args.out or tempfile.mkdtemp(prefix="keras-on-plax-")
    path = os.path.join(out, "quadrants.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    _, accuracy = loaded.evaluate(x_test, y_test, verbose=0)
    gap = float(np.max(np.abs(loaded.predict(x_test, verbose=0)
                              - model.predict(x_test, verbose=0))))
    print(f"test accuracy of the loaded model: {accuracy:.3f}")
    print(f"largest difference between the loaded and trained model's predictions: {gap:.1e}")
    return accuracy


if __name__ == "__main__":
    main()
