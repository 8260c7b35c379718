// Runs an ONNX model exported by cohort in ONNX Runtime (the npm package
// onnxruntime-node, a runtime nobody on this project wrote) on the inputs
// cohort predict ran on, and compares the outputs.
//
//   node onnx_check.js ORT_DIR MODEL.onnx X.npy COHORT_Y.npy
//
// Prints the largest difference; exits 1 above 1e-4 relative (to the
// output's largest magnitude).
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
  const bytes = b.subarray(10 + len);
  const data = new Float32Array(bytes.length / 4);
  for (let i = 0; i < data.length; ++i) data[i] = bytes.readFloatLE(4 * i);
  return {shape, data};
}

(async () => {
  const [ortDir, model, xFile, yFile] = process.argv.slice(2);
  const ort = require(path.join(ortDir, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(model);
  const x = readNpy(xFile);
  const y = readNpy(yFile);
  const out = (await session.run(
      {input: new ort.Tensor('float32', x.data, x.shape)})).output;
  if (out.dims.join(',') !== y.shape.join(',')) {
    console.log('shapes differ: onnxruntime ' + out.dims + ', cohort ' + y.shape);
    process.exit(1);
  }
  let diff = 0, scale = 1e-12;
  for (let i = 0; i < y.data.length; ++i) {
    diff = Math.max(diff, Math.abs(out.data[i] - y.data[i]));
    scale = Math.max(scale, Math.abs(out.data[i]));
  }
  const rel = diff / scale;
  console.log(`${path.basename(model)}: onnxruntime ${out.dims}; largest ` +
              `difference ${diff.toExponential(3)} (${rel.toExponential(3)} ` +
              `of the largest output)`);
  process.exit(rel <= 1e-4 ? 0 : 1);
})().catch((e) => { console.log(String(e)); process.exit(1); });
