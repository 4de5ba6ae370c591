//! A copy of a core module that records when each of its functions first
//! ran, for a profile run to read the order out of.

use wasm_encoder::reencode::{Error as ReencodeError, Reencode, utils};
use wasm_encoder::{ConstExpr, ExportKind, GlobalType, Instruction, ValType};
use wasmparser::{FunctionBody, Parser};

use super::{FunctionOrderError, Functions, functions, validate};

/// The export under which [`instrument_entries`] publishes the global of
/// each defined function, by its position among the defined functions.
pub const ENTRY_EXPORT_PREFIX: &str = "function-order:first-entry-";

/// A copy of `core` that records when each defined function first ran: a
/// mutable i32 global per function, exported as [`ENTRY_EXPORT_PREFIX`] and
/// its position, 0 until the function is entered, then the count of
/// functions first entered until then (1 for the first). For a profile run
/// only: the copy is slower, and its globals count across calls.
pub fn instrument_entries(core: &[u8]) -> Result<Vec<u8>, FunctionOrderError> {
    validate(core).map_err(FunctionOrderError::InvalidInput)?;
    let Functions { imported_globals, names, .. } = functions(core)?;
    let mut instrument = Instrument { imported_globals, defined: names.len() as u32, counter: None, next_body: 0 };
    let mut module = wasm_encoder::Module::new();
    instrument.parse_core_module(&mut module, Parser::new(0), core)?;
    if instrument.counter.is_none() {
        return Err(FunctionOrderError::NoGlobals);
    }
    let module = module.finish();
    validate(&module).map_err(FunctionOrderError::Invalid)?;
    Ok(module)
}

struct Instrument {
    imported_globals: u32,
    defined: u32,
    /// The index of the counter global (set by the global section); the
    /// marks follow it.
    counter: Option<u32>,
    next_body: u32,
}

impl Instrument {
    fn counter(&self) -> u32 {
        self.counter.unwrap_or(0)
    }
}

impl Reencode for Instrument {
    type Error = std::convert::Infallible;

    fn parse_global_section(
        &mut self,
        globals: &mut wasm_encoder::GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        // Imported globals come first in the index space; defined ones follow.
        let mut count = 0;
        for global in section {
            self.parse_global(globals, global?)?;
            count += 1;
        }
        self.counter = Some(self.imported_globals + count);
        let mark = GlobalType { val_type: ValType::I32, mutable: true, shared: false };
        for _ in 0..=self.defined {
            globals.global(mark, &ConstExpr::i32_const(0));
        }
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        let counter = self.counter();
        for position in 0..self.defined {
            exports.export(&format!("{ENTRY_EXPORT_PREFIX}{position}"), ExportKind::Global, counter + 1 + position);
        }
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        body: FunctionBody<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        let counter = self.counter();
        let mark = counter + 1 + self.next_body;
        self.next_body += 1;
        let mut function = utils::new_function_with_parsed_locals(self, &body)?;
        // if mark == 0 { counter += 1; mark = counter }
        for instruction in [
            Instruction::GlobalGet(mark),
            Instruction::I32Eqz,
            Instruction::If(wasm_encoder::BlockType::Empty),
            Instruction::GlobalGet(counter),
            Instruction::I32Const(1),
            Instruction::I32Add,
            Instruction::GlobalSet(counter),
            Instruction::GlobalGet(counter),
            Instruction::GlobalSet(mark),
            Instruction::End,
        ] {
            function.instruction(&instruction);
        }
        let mut reader = body.get_operators_reader()?;
        while !reader.eof() {
            function.instruction(&self.parse_instruction(&mut reader)?);
        }
        code.function(&function);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::{Engine, Instance, Store};

    use super::super::tests::module;
    use super::*;

    #[test]
    fn the_instrumented_copy_records_when_each_function_first_ran_and_leaves_the_rest_at_zero() {
        let instrumented = instrument_entries(&module()).expect("instruments");
        let engine = Engine::default();
        let module = wasmtime::Module::new(&engine, &instrumented).expect("compiles");
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates");
        let run = instance.get_typed_func::<(), i32>(&mut store, "run").expect("exports run");
        assert_eq!(run.call(&mut store, ()).expect("runs"), 41, "the copy computes what the module does");
        let rank = |store: &mut Store<()>, position: u32| {
            let global = instance.get_global(&mut *store, &format!("{ENTRY_EXPORT_PREFIX}{position}")).expect("mark");
            global.get(&mut *store).unwrap_i32()
        };
        let ranks: Vec<i32> = (0..4).map(|position| rank(&mut store, position)).collect();
        // sum entered first, then one, then twenty (twice: ranked once).
        assert_eq!(ranks, [2, 3, 0, 1]);
    }
}
