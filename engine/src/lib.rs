//! gapscope's instrumented decode engine: Llama / Qwen decoders from an HF `config.json`, a CPU
//! f32 reference backend and a CUDA backend whose every launch is recorded with its op, layer,
//! bucket, bytes and FLOPs.
pub mod bench;
pub mod calibrate;
pub mod config;
pub mod cpu;
pub mod cuda;
pub mod dispatch;
pub mod error;
pub mod kbench;
pub mod kv;
pub mod lever_matrix;
pub mod model;
pub mod numerics;
pub mod quant;
pub mod records;
pub mod rng;
pub mod selftest;
pub mod spec;
pub mod tokenizer;
pub mod weights;

pub use config::ModelConfig;
pub use error::{EngineError, Result};
pub use numerics::Numerics;
pub use quant::{Matrix, WeightFormat};
pub use weights::ModelWeights;
