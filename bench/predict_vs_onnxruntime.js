// ONNX Runtime's side of bench/predict_vs_onnxruntime.sh: runs an ONNX model
// (the npm package onnxruntime-node, CPU execution provider) over the
// samples of a float32 .npy, BATCH at a time, on THREADS intra-op threads.
// The first batch is a warm-up (ORT, like cohort, prepares its kernels on
// the first run); the rest are timed, session.run alone (the inputs are
// already tensors, the outputs are not copied out inside the clock).
//
//   node predict_vs_onnxruntime.js ORT_DIR MODEL.onnx X.npy THREADS BATCH \
//        [COHORT_Y.npy]
//
// Prints one JSON line: {"images": timed samples, "seconds": their time},
// and with COHORT_Y.npy (cohort predict's outputs for the same X.npy) also
// "max_abs_diff" and "max_abs_output" (ORT's largest |logit|) over every
// sample, the warm-up batch included.
'use strict';
const fs = require('fs');
const path = require('path');

// A float32 .npy file as np.save writes it (version 1, C order).
function readNpy(file) {
  const b = fs.readFileSync(file);
  const len = b.readUInt16LE(8);
  const header = b.toString('latin1', 10, 10 + len);
  if (!header.includes("'<f4'")) throw new Error(file + ': not float32');
  const shape = header.match(/'shape': \(([^)]*)\)/)[1]
                    .split(',').filter((s) => s.trim()).map(Number);
  // Copied: the file's floats need not start 4-byte aligned in `b`.
  const data = new Float32Array((b.length - 10 - len) / 4);
  new Uint8Array(data.buffer).set(b.subarray(10 + len));
  return {shape, data};
}

(async () => {
  const [ortDir, model, xFile, threadsArg, batchArg, yFile] =
      process.argv.slice(2);
  const threads = Number(threadsArg), batch = Number(batchArg);
  const ort = require(path.join(ortDir, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const x = readNpy(xFile);
  const n = x.shape[0], per = x.data.length / n;
  if (n < 2 * batch || n % batch !== 0) {
    throw new Error(`${xFile}: ${n} samples; want a multiple of ${batch}, ` +
                    'at least two batches');
  }
  const inputs = [];
  for (let first = 0; first < n; first += batch) {
    inputs.push(new ort.Tensor(
        'float32', x.data.subarray(first * per, (first + batch) * per),
        [batch, ...x.shape.slice(1)]));
  }
  const outputs = [await session.run({input: inputs[0]})];
  const start = process.hrtime.bigint();
  for (let i = 1; i < inputs.length; ++i) {
    outputs.push(await session.run({input: inputs[i]}));
  }
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const result = {images: n - batch, seconds};
  if (yFile) {
    const y = readNpy(yFile);
    const classes = y.data.length / y.shape[0];
    if (y.shape[0] !== n) throw new Error(`${yFile}: ${y.shape[0]} samples`);
    let diff = 0, scale = 0;
    outputs.forEach((o, i) => {
      const out = o.output.data;
      for (let j = 0; j < out.length; ++j) {
        diff = Math.max(diff, Math.abs(out[j] - y.data[i * batch * classes + j]));
        scale = Math.max(scale, Math.abs(out[j]));
      }
    });
    result.max_abs_diff = diff;
    result.max_abs_output = scale;
  }
  console.log(JSON.stringify(result));
})().catch((e) => { console.log(String(e)); process.exit(1); });
