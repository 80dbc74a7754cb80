import ArgumentParsing
import ExitCodes
import Foundation
import ModelPictures
import ModelRuntime
import ModelTraining

/// `modelc evaluate MODEL DATA_DIR [--json] [--threads N] [--report OUT.html]`.
enum EvaluateCommand {
    static let spec = CommandSpec(
        name: "evaluate",
        abstract: "Measure an image classifier on labelled folders: accuracy, precision, recall, confusion matrix.",
        discussion: """
            DATA_DIR holds one folder per label, named by the label. Every image is center-cropped and
            scaled to the model's image input and classified. Images that cannot be decoded are listed
            and left out; folders whose label the model does not have count as wrong.
            """,
        arguments: [PositionalSpec(name: "MODEL", help: "A classifier with an image input: bundle, .mlmodel or .mlpackage."),
                    PositionalSpec(name: "DATA_DIR", help: "One folder of images per label.")],
        options: [
            OptionSpec(name: "json", help: "Print the report as JSON."),
            OptionSpec(name: "threads", valueName: "N", help: "Threads (default: every core)."),
            OptionSpec(name: "report", valueName: "OUT.html", help: "Also write the report as one self-contained HTML page with charts."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "MODEL"], let data = arguments[positional: "DATA_DIR"] else { return .usage }
        var configuration = ModelConfiguration()
        if let text = arguments.value("threads") {
            guard let threads = Int(text), threads >= 1 else {
                return Modelc.usageFailure(.invalidValue(option: "threads", value: text, reason: "expected a positive integer"),
                                           usage: Modelc.usageLine(for: spec))
            }
            configuration.threads = threads
        }
        let reportPath = arguments.value("report")
        if let reportPath, let problem = TrainCommand.reportProblem(reportPath) {
            return Modelc.usageFailure(.invalidValue(option: "report", value: reportPath, reason: problem),
                                       usage: Modelc.usageLine(for: spec))
        }
        let folders: LabelledImageFolders
        do throws(TrainingError) {
            folders = try LabelledImageFolders.scan(data)
        } catch {
            return TrainCommand.failure(error)
        }
        let model: Model
        switch PredictCommand.open(path, configuration: configuration) {
        case .opened(let opened): model = opened
        case .failed(let code): return code
        }
        let evaluation: ClassifierEvaluation
        let progress = TrainingProgress(quiet: arguments.has("json"))
        do throws(TrainingError) {
            evaluation = try ClassifierEvaluation.evaluate(model, folders: folders) { done, total in
                progress.show(.extracting(done: done, total: total))
            }
            progress.clear()
        } catch {
            return TrainCommand.failure(error)
        }
        for skipped in evaluation.skipped {
            Output.error("\(Modelc.toolName): warning: \(skipped.path): skipped: \(skipped.reason)\n")
        }
        for label in evaluation.unknownLabels {
            Output.error("\(Modelc.toolName): warning: \"\(label)\" is not one of the model's labels; its images count as wrong\n")
        }
        if let reportPath {
            let warnings = (folders.imbalance.map { [$0.description] } ?? [])
                + evaluation.unknownLabels.map { "\"\($0)\" is not one of the model's labels; its images count as wrong" }
            let page = ReportPage.evaluation(evaluation, modelPath: path, dataDirectory: data, warnings: warnings)
            let code = TrainCommand.writeReport(page, to: reportPath)
            guard code == .success else { return code }
        }
        if arguments.has("json") {
            Output.print(TrainCommand.jsonText(evaluation.jsonObject) + "\n")
        } else {
            Output.print(evaluation.report.text(title: path))
        }
        return .success
    }
}
