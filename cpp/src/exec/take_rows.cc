#include "exec/take_rows.h"

#include <arrow/builder.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/cast.h>
#include <arrow/datum.h>
#include <arrow/type.h>

#include "util/memory.h"

namespace shardfeed {

namespace {

// `type` with string_view and binary_view (at any depth of lists and structs)
// replaced by string and binary.
std::shared_ptr<arrow::DataType> WithoutViews(const std::shared_ptr<arrow::DataType>& type) {
  auto member = [](const std::shared_ptr<arrow::Field>& f) {
    return f->WithType(WithoutViews(f->type()));
  };
  switch (type->id()) {
    case arrow::Type::STRING_VIEW:
      return arrow::utf8();
    case arrow::Type::BINARY_VIEW:
      return arrow::binary();
    case arrow::Type::LIST:
      return arrow::list(member(type->field(0)));
    case arrow::Type::LARGE_LIST:
      return arrow::large_list(member(type->field(0)));
    case arrow::Type::FIXED_SIZE_LIST:
      return arrow::fixed_size_list(
          member(type->field(0)), static_cast<const arrow::FixedSizeListType&>(*type).list_size());
    case arrow::Type::STRUCT: {
      arrow::FieldVector fields;
      for (const auto& f : type->fields()) fields.push_back(member(f));
      return arrow::struct_(fields);
    }
    default:
      return type;
  }
}

}  // namespace

arrow::Result<std::shared_ptr<arrow::Table>> TakeRows(std::shared_ptr<arrow::Table> table,
                                                      const std::vector<int64_t>& rows) {
  for (int i = 0; i < table->num_columns(); ++i) {
    const auto& type = table->field(i)->type();
    auto plain = WithoutViews(type);
    if (plain->Equals(*type)) continue;
    ARROW_ASSIGN_OR_RAISE(arrow::Datum cast,
                          arrow::compute::Cast(arrow::Datum(table->column(i)), plain));
    ARROW_ASSIGN_OR_RAISE(
        table, table->SetColumn(i, table->field(i)->WithType(plain), cast.chunked_array()));
  }
  arrow::Int64Builder indices(EnginePool());
  ARROW_RETURN_NOT_OK(indices.AppendValues(rows));
  ARROW_ASSIGN_OR_RAISE(auto index_array, indices.Finish());
  ARROW_ASSIGN_OR_RAISE(arrow::Datum taken,
                        arrow::compute::Take(arrow::Datum(table), arrow::Datum(index_array)));
  return taken.table();
}

}  // namespace shardfeed
