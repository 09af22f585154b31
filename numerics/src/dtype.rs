//! The element types a dump may hold, and their decoding to `f64`.

/// A safetensors element type gapscope reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F64,
    F32,
    BF16,
    F16,
    I64,
    I32,
}

impl DType {
    /// The safetensors spelling (`F32`, `BF16`, ...).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "F64" => Self::F64,
            "F32" => Self::F32,
            "BF16" => Self::BF16,
            "F16" => Self::F16,
            "I64" => Self::I64,
            "I32" => Self::I32,
            _ => return None,
        })
    }

    pub fn size(self) -> usize {
        match self {
            Self::F64 | Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::BF16 | Self::F16 => 2,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Self::F64 | Self::F32 | Self::BF16 | Self::F16)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::F64 => "float64",
            Self::F32 => "float32",
            Self::BF16 => "bfloat16",
            Self::F16 => "float16",
            Self::I64 => "int64",
            Self::I32 => "int32",
        }
    }

    /// Decodes little-endian `bytes` (a whole number of elements) into `out`.
    pub fn decode(self, bytes: &[u8], out: &mut [f64]) {
        let n = self.size();
        debug_assert_eq!(bytes.len(), out.len() * n);
        let chunks = bytes.chunks_exact(n);
        match self {
            Self::F64 => chunks.zip(out).for_each(|(c, o)| {
                *o = f64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            }),
            Self::F32 => chunks.zip(out).for_each(|(c, o)| {
                *o = f64::from(f32::from_le_bytes(c.try_into().unwrap_or([0; 4])));
            }),
            Self::BF16 => chunks.zip(out).for_each(|(c, o)| {
                *o = f64::from(half::bf16::from_le_bytes([c[0], c[1]]).to_f32());
            }),
            Self::F16 => chunks.zip(out).for_each(|(c, o)| {
                *o = f64::from(half::f16::from_le_bytes([c[0], c[1]]).to_f32());
            }),
            Self::I64 => chunks.zip(out).for_each(|(c, o)| {
                *o = i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64;
            }),
            Self::I32 => chunks.zip(out).for_each(|(c, o)| {
                *o = f64::from(i32::from_le_bytes(c.try_into().unwrap_or([0; 4])));
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_decode_exactly() {
        let mut out = [0.0; 3];
        let b: Vec<u8> = [1.5f32, -2.0, 3.140625]
            .iter()
            .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
            .collect();
        DType::BF16.decode(&b, &mut out);
        assert_eq!(out, [1.5, -2.0, 3.140625]);
        let b: Vec<u8> = [0.5f32, 65504.0, -0.25]
            .iter()
            .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
            .collect();
        DType::F16.decode(&b, &mut out);
        assert_eq!(out, [0.5, 65504.0, -0.25]);
    }
}
