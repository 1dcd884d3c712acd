//! The problem file as TOML gives it: the serde types, every key spanned for its line.
use super::*;

// ---------------------------------------------------------------------------------------------
// The file as TOML gives it.

/// A number or an expression string.
#[derive(Clone, Debug)]
pub(super) enum FieldValue {
    Number(f64),
    Expression(String),
}

impl<'de> Deserialize<'de> for FieldValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = FieldValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or an expression string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FieldValue, E> {
                Ok(FieldValue::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FieldValue, E> {
                Ok(FieldValue::Number(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FieldValue, E> {
                Ok(FieldValue::Number(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FieldValue, E> {
                Ok(FieldValue::Expression(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A coefficient: a number, an expression, or numbers per region.
#[derive(Clone, Debug)]
pub(super) enum CoefficientValue {
    Field(FieldValue),
    PerRegion(Vec<(String, Spanned<f64>)>),
}

impl<'de> Deserialize<'de> for CoefficientValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CoefficientValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, an expression string or a table of values per region")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Number(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Number(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Number(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CoefficientValue, E> {
                Ok(CoefficientValue::Field(FieldValue::Expression(v.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CoefficientValue, A::Error> {
                let mut values = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    values.push((key, map.next_value::<Spanned<f64>>()?));
                }
                Ok(CoefficientValue::PerRegion(values))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) title: Option<String>,
    pub(super) mesh: Spanned<RawMesh>,
    #[serde(default)]
    pub(super) equation: RawEquation,
    #[serde(default)]
    pub(super) boundary: RawBoundary,
    pub(super) exact: Option<Spanned<RawExact>>,
    pub(super) discretization: Spanned<RawDiscretization>,
    #[serde(default)]
    pub(super) solver: RawSolver,
    #[serde(default)]
    pub(super) output: RawOutput,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMesh {
    pub(super) file: Option<Spanned<String>>,
    pub(super) generate: Option<Spanned<String>>,
    pub(super) perturb: Option<Spanned<f64>>,
    pub(super) seed: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEquation {
    pub(super) kappa: Option<Spanned<CoefficientValue>>,
    pub(super) reaction: Option<Spanned<CoefficientValue>>,
    pub(super) source: Option<Spanned<FieldValue>>,
    pub(super) mean_zero: Option<bool>,
}

/// `[boundary]`: `default` and one condition per group (any other key).
#[derive(Default)]
pub(super) struct RawBoundary {
    pub(super) default: Option<Spanned<FieldValue>>,
    pub(super) groups: Vec<(String, Spanned<RawCondition>)>,
}

impl<'de> Deserialize<'de> for RawBoundary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawBoundary;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of boundary groups")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawBoundary, A::Error> {
                let mut raw = RawBoundary::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "default" {
                        raw.default = Some(map.next_value()?);
                    } else {
                        raw.groups.push((key, map.next_value()?));
                    }
                }
                Ok(raw)
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCondition {
    pub(super) dirichlet: Option<Spanned<FieldValue>>,
    pub(super) neumann: Option<Spanned<FieldValue>>,
    pub(super) robin: Option<Spanned<FieldValue>>,
    pub(super) alpha: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExact {
    pub(super) u: Spanned<FieldValue>,
    pub(super) gradient: Option<Spanned<Vec<Spanned<FieldValue>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDiscretization {
    pub(super) order: Spanned<u64>,
    pub(super) tau: Option<Spanned<FieldValue>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum PrecisionName {
    F32,
    F64,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSolver {
    pub(super) method: Option<Spanned<String>>,
    pub(super) tolerance: Option<Spanned<f64>>,
    pub(super) max_iterations: Option<Spanned<u64>>,
    pub(super) backend: Option<hdg::Backend>,
    pub(super) precision: Option<PrecisionName>,
    pub(super) operator: Option<Spanned<String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOutput {
    pub(super) json: Option<String>,
    pub(super) vtu: Option<String>,
    pub(super) png: Option<String>,
}
