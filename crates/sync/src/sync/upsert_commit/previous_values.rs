//! The previous values of a change event's unsent values (Debezium's
//! placeholder for an unchanged TOASTed column, written as a null by the
//! decoder): read from the held row of an earlier version of the key, or
//! from the table's row of the key (its data file, at its position), and
//! put into the winning row in place of the null.
//!
//! The values are kept in memory from when the winners are found until
//! their rows are written: a sync holds as many as it has winning rows
//! with unsent values (a `--follow` commit, those of one interval).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch};
use topicberg_iceberg::{Destination, TableHandle};

use super::super::failure::UpsertError;
use super::super::upsert::UpsertBuffer;

/// Where an unsent value is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Donor {
    /// The held row of an earlier version of the key.
    Held(u32),
    /// The table's row of the key: its data file and position.
    Table { file: String, pos: u64 },
}

/// One unsent value of a winning held row and where it is read from.
#[derive(Debug, Clone)]
pub(super) struct Filling {
    pub row: u32,
    pub column: Arc<str>,
    pub donor: Donor,
}

/// The values to put into winning rows: per winning held row, (column,
/// a one-row array of its value).
#[derive(Debug, Default)]
pub(super) struct PreviousValues {
    by_row: HashMap<u32, Vec<(Arc<str>, ArrayRef)>>,
}

impl PreviousValues {
    /// Whether there is nothing to fill.
    pub(super) fn is_empty(&self) -> bool {
        self.by_row.is_empty()
    }

    /// `f`'s value: row `at` of `column` (null without the column).
    fn put(&mut self, f: &Filling, column: Option<&ArrayRef>, at: usize) {
        let value = match column {
            Some(column) => column.slice(at, 1),
            None => arrow_array::new_null_array(&arrow_schema::DataType::Null, 1),
        };
        let row = self.by_row.entry(f.row).or_default();
        row.push((Arc::clone(&f.column), value));
    }

    /// How many values are filled.
    pub(super) fn len(&self) -> usize {
        self.by_row.values().map(Vec::len).sum()
    }

    /// `batch` (the winning rows `rows`, in order) with the values filled
    /// in, each cast to its column's type in the batch.
    pub(super) fn fill(
        &self,
        batch: RecordBatch,
        rows: &[u32],
    ) -> Result<RecordBatch, UpsertError> {
        let mut by_column: BTreeMap<&str, Vec<(usize, &ArrayRef)>> = BTreeMap::new();
        for (i, row) in rows.iter().enumerate() {
            for (column, value) in self.by_row.get(row).into_iter().flatten() {
                by_column.entry(column).or_default().push((i, value));
            }
        }
        if by_column.is_empty() {
            return Ok(batch);
        }
        let schema = batch.schema();
        let mut arrays = batch.columns().to_vec();
        for (name, values) in by_column {
            let Ok(at) = schema.index_of(name) else {
                continue;
            };
            arrays[at] =
                filled(&arrays[at], &values).map_err(|source| UpsertError::PreviousValue {
                    column: name.to_owned(),
                    source,
                })?;
        }
        RecordBatch::try_new(schema, arrays).map_err(|source| UpsertError::PreviousValue {
            column: String::new(),
            source,
        })
    }
}

/// `column` with the rows of `values` replaced by their value.
fn filled(
    column: &ArrayRef,
    values: &[(usize, &ArrayRef)],
) -> Result<ArrayRef, arrow_schema::ArrowError> {
    let mut sources: Vec<ArrayRef> = Vec::with_capacity(values.len() + 1);
    sources.push(Arc::clone(column));
    let mut indices: Vec<(usize, usize)> = (0..column.len()).map(|i| (0, i)).collect();
    for (i, value) in values {
        let value = if value.data_type() == column.data_type() {
            Arc::clone(value)
        } else {
            arrow_cast::cast(value, column.data_type())?
        };
        indices[*i] = (sources.len(), 0);
        sources.push(value);
    }
    let refs: Vec<&dyn Array> = sources.iter().map(AsRef::as_ref).collect();
    arrow_select::interleave::interleave(&refs, &indices)
}

/// Reads the value of every filling: from the held rows, then from the
/// table's data files (one read of each file, of the columns and rows
/// named).
pub(super) async fn read_previous_values(
    destination: &Destination,
    handle: &TableHandle,
    buffer: &UpsertBuffer,
    fillings: &[Filling],
) -> Result<PreviousValues, UpsertError> {
    let mut values = PreviousValues::default();
    if fillings.is_empty() {
        return Ok(values);
    }
    read_held(buffer, fillings, &mut values)?;
    read_table(destination, handle, fillings, &mut values).await?;
    Ok(values)
}

/// The fillings whose donor is a held row.
fn read_held(
    buffer: &UpsertBuffer,
    fillings: &[Filling],
    values: &mut PreviousValues,
) -> Result<(), UpsertError> {
    let mut by_donor: BTreeMap<u32, Vec<&Filling>> = BTreeMap::new();
    for f in fillings {
        if let Donor::Held(donor) = f.donor {
            by_donor.entry(donor).or_default().push(f);
        }
    }
    if by_donor.is_empty() {
        return Ok(());
    }
    for part in buffer.parts(1) {
        for item in part.batches() {
            let (first, held) = item?;
            let range = held.row_range(first);
            let donors: Vec<u32> = by_donor.range(range).map(|(row, _)| *row).collect();
            if donors.is_empty() {
                continue;
            }
            let rows = held.take_rows(first, &donors)?;
            for (i, donor) in donors.iter().enumerate() {
                for f in &by_donor[donor] {
                    // A column the donor's batch did not have yet: null.
                    values.put(f, rows.column_by_name(&f.column), i);
                }
            }
        }
    }
    Ok(())
}

/// The fillings whose donor is the table's row.
async fn read_table(
    destination: &Destination,
    handle: &TableHandle,
    fillings: &[Filling],
    values: &mut PreviousValues,
) -> Result<(), UpsertError> {
    let mut by_file: BTreeMap<&str, Vec<(u64, &Filling)>> = BTreeMap::new();
    for f in fillings {
        if let Donor::Table { file, pos } = &f.donor {
            by_file.entry(file).or_default().push((*pos, f));
        }
    }
    let schema = handle.metadata().current_schema().clone();
    for (file, mut wanted) in by_file {
        wanted.sort_by_key(|(pos, _)| *pos);
        let mut positions: Vec<u64> = wanted.iter().map(|(pos, _)| *pos).collect();
        positions.dedup();
        let mut ids: Vec<i32> = wanted
            .iter()
            .filter_map(|(_, f)| schema.field_by_name(&f.column).map(|field| field.id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let read = destination
            .rows_at(file, &positions, &ids)
            .await
            .map_err(UpsertError::KeyIndex)?;
        for (pos, f) in wanted {
            let at = positions.binary_search(&pos).expect("listed above");
            let id = schema.field_by_name(&f.column).map(|field| field.id);
            let column = id
                .and_then(|id| ids.binary_search(&id).ok())
                .and_then(|i| read[i].as_ref());
            values.put(f, column, at);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::{LargeStringArray, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn fill_puts_each_value_in_its_winning_row_cast_to_the_columns_type() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("big", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
                Arc::new(StringArray::from(vec![Some("sent"), None, None])),
            ],
        )
        .unwrap();
        let mut values = PreviousValues::default();
        // Held row 11 (the batch's second winning row) from a held row; row
        // 12 from a table file read as another string type; row 99 is not
        // in this batch.
        let held: ArrayRef = Arc::new(StringArray::from(vec!["x", "kept"]).slice(1, 1));
        let table: ArrayRef = Arc::new(LargeStringArray::from(vec!["from the table"]));
        let big = Arc::<str>::from("big");
        values.by_row.insert(11, vec![(Arc::clone(&big), held)]);
        values.by_row.insert(12, vec![(Arc::clone(&big), table)]);
        values.by_row.insert(
            99,
            vec![(big, Arc::new(StringArray::from(vec!["no"])) as ArrayRef)],
        );
        assert_eq!(values.len(), 3);
        let filled = values.fill(batch, &[10, 11, 12]).unwrap();
        let big = filled.column(1).as_string::<i32>();
        let got: Vec<Option<&str>> = big.iter().collect();
        assert_eq!(got, [Some("sent"), Some("kept"), Some("from the table")]);
        assert_eq!(filled.column(0).as_string::<i32>().value(2), "c");
    }
}
