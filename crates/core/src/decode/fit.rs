//! Whether a column can hold what a writer schema declares for its field,
//! and if not, the wider type it can take: the schema evolution Iceberg
//! allows (`int` -> `long`, `float` -> `double`, decimal precision
//! widening, new optional struct fields). Shared by Avro and Protobuf.

use std::sync::Arc;

use crate::columns::{ColumnType, MapFields, NestedField};

/// What a column needs to hold a writer's field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// It holds it as it is (maybe widening each value: `int` into `long`).
    Holds,
    /// It must first become this type (existing nested field ids kept; new
    /// nested fields have id 0 until the column is changed).
    Widen(ColumnType),
    /// Iceberg cannot change the column to hold it; the reason.
    Incompatible(String),
}

/// How `column` can hold values of type `writer`.
pub fn fit(column: &ColumnType, writer: &ColumnType) -> Fit {
    use ColumnType::*;
    match (column, writer) {
        (a, b) if a == b => Fit::Holds,
        (Long, Int) | (Double, Float) => Fit::Holds,
        (Int, Long) | (Float, Double) => Fit::Widen(writer.clone()),
        (
            Decimal {
                precision: p1,
                scale: s1,
            },
            Decimal {
                precision: p2,
                scale: s2,
            },
        ) if s1 == s2 => {
            if p1 >= p2 {
                Fit::Holds
            } else {
                Fit::Widen(writer.clone())
            }
        }
        (Struct(have), Struct(want)) => fit_struct(have, want),
        (List(have), List(want)) => match fit(&have.ty, &want.ty) {
            Fit::Holds => Fit::Holds,
            Fit::Widen(ty) => Fit::Widen(List(Arc::new(NestedField {
                ty,
                ..(**have).clone()
            }))),
            Fit::Incompatible(e) => Fit::Incompatible(format!("list element: {e}")),
        },
        (Map(have), Map(want)) => {
            if have.key.ty != want.key.ty {
                return Fit::Incompatible(format!(
                    "map keys are {} in the table, {} in the schema",
                    have.key.ty, want.key.ty
                ));
            }
            match fit(&have.value.ty, &want.value.ty) {
                Fit::Holds => Fit::Holds,
                Fit::Widen(ty) => Fit::Widen(Map(Arc::new(MapFields {
                    key: have.key.clone(),
                    value: NestedField {
                        ty,
                        ..have.value.clone()
                    },
                }))),
                Fit::Incompatible(e) => Fit::Incompatible(format!("map value: {e}")),
            }
        }
        _ => Fit::Incompatible(format!(
            "the column is {column}, the schema gives {writer}; Iceberg only widens int to long, \
             float to double, decimal precision, and adds optional struct fields"
        )),
    }
}

/// A struct holds a writer struct when it has each writer field in a type
/// that holds it; fields it lacks are added (optional), fields the writer
/// lacks stay (they read null).
fn fit_struct(have: &[NestedField], want: &[NestedField]) -> Fit {
    let mut fields: Vec<NestedField> = have.to_vec();
    let mut changed = false;
    for w in want {
        match fields.iter_mut().find(|h| h.name == w.name) {
            None => {
                fields.push(NestedField::optional(0, &w.name, w.ty.clone()));
                changed = true;
            }
            Some(h) => match fit(&h.ty, &w.ty) {
                Fit::Holds => {}
                Fit::Widen(ty) => {
                    h.ty = ty;
                    changed = true;
                }
                Fit::Incompatible(e) => return Fit::Incompatible(format!("field {}: {e}", w.name)),
            },
        }
    }
    if changed {
        Fit::Widen(ColumnType::Struct(fields.into()))
    } else {
        Fit::Holds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnType::*;

    fn strukt(fields: &[(i32, &str, ColumnType)]) -> ColumnType {
        Struct(
            fields
                .iter()
                .map(|(id, n, t)| NestedField::optional(*id, *n, t.clone()))
                .collect::<Vec<_>>()
                .into(),
        )
    }

    #[test]
    fn narrower_writers_fit_wider_ones_widen_others_are_refused() {
        assert_eq!(fit(&Long, &Int), Fit::Holds);
        assert_eq!(fit(&Int, &Long), Fit::Widen(Long));
        assert_eq!(fit(&Float, &Double), Fit::Widen(Double));
        let d = |p, s| Decimal {
            precision: p,
            scale: s,
        };
        assert_eq!(fit(&d(12, 2), &d(10, 2)), Fit::Holds);
        assert_eq!(fit(&d(10, 2), &d(12, 2)), Fit::Widen(d(12, 2)));
        assert!(matches!(fit(&d(10, 2), &d(10, 3)), Fit::Incompatible(_)));
        assert!(matches!(fit(&Long, &String), Fit::Incompatible(_)));
    }

    #[test]
    fn structs_gain_fields_keep_ids_and_widen_inside() {
        let have = strukt(&[(5, "city", String), (6, "zip", Int)]);
        let want = strukt(&[(0, "zip", Long), (0, "street", String)]);
        assert_eq!(
            fit(&have, &want),
            Fit::Widen(strukt(&[
                (5, "city", String),
                (6, "zip", Long),
                (0, "street", String)
            ]))
        );
        assert_eq!(fit(&have, &strukt(&[(0, "city", String)])), Fit::Holds);
        let e = fit(&have, &strukt(&[(0, "city", Long)]));
        assert!(matches!(e, Fit::Incompatible(m) if m.starts_with("field city")));
    }
}
