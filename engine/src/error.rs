//! The engine's error type: every variant says what was wrong and, where there is one, with
//! which file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Weights { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
    /// A CUDA condition the engine names itself (a missing library, a capture with no graph).
    #[error("CUDA: {0}")]
    Cuda(String),
    /// A CUDA driver call failed.
    #[error("CUDA: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// A cuBLAS call failed.
    #[error("cuBLAS: {0}")]
    Cublas(#[from] cudarc::cublas::result::CublasError),
    /// NVRTC could not compile a kernel module; the message carries the compiler's log.
    #[error("NVRTC failed on kernels/cuda/{module}.cu: {source}")]
    Compile {
        module: &'static str,
        #[source]
        source: cudarc::nvrtc::CompileError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Trace(#[from] gapscope_traces::TraceError),
}

pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
    pub fn invalid(msg: impl Into<String>) -> Self {
        Self::Invalid(msg.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    /// cudarc's errors keep their source; a cuBLAS one says so. (A driver error's text asks
    /// the driver library for its description, so it is not printed here, with no GPU.)
    #[test]
    fn cuda_errors_name_their_library_and_keep_the_source() {
        let d = cudarc::driver::DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        let e = EngineError::from(d);
        assert!(matches!(e, EngineError::Driver(x) if x == d));
        assert!(std::error::Error::source(&EngineError::from(d)).is_some());
        let b = cudarc::cublas::result::CublasError(
            cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_NOT_INITIALIZED,
        );
        let e = EngineError::from(b);
        assert!(e.to_string().starts_with("cuBLAS: "), "{e}");
        assert!(e.to_string().contains("NOT_INITIALIZED"), "{e}");
    }
}
