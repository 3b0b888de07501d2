// fp32 on CUDA means fp32. ONNX Runtime's CUDA provider lets cuBLAS multiply fp32 matrices in
// TF32 (10-bit mantissas) unless its `use_tf32` option is 0, and onnxruntime-node passes no
// CUDA option but the device id. NVIDIA_TF32_OVERRIDE=0 makes cuBLAS and cuDNN ignore TF32
// requests process-wide, so --precision fp32 on CUDA agrees with the CPU (and with PyTorch,
// whose matmuls default to allow_tf32 False). It is read from the process's environment when
// the CUDA libraries start, so it is set on the main thread, before any model worker exists;
// a value the user set is kept. fp16 runs are unaffected: their projections are fp16 products.
export function keepCudaFp32Exact(): void {
  process.env.NVIDIA_TF32_OVERRIDE ??= '0';
}
